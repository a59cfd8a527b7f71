package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	commands["version"] = command{summary: "print the version", run: runVersion}
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	fmt.Fprintf(stdout, "iop %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
