// Command iop is the iop gateway binary: one executable whose subcommands
// run the edge (gateway), a node agent (node), both in one process (dev),
// or print the version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	ctx, stop := signalContext()
	err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, errUsage) {
		fmt.Fprintln(os.Stderr, "iop:", err)
	}
	if err != nil {
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// errUsage reports a command-line mistake; the usage text was printed.
var errUsage = errors.New("usage")

// errHelped ends a command whose help was asked for and printed: exit 0.
var errHelped = errors.New("help printed")

// parseError maps a flag parsing error: -h/--help printed the command's
// help (success), anything else is a usage mistake.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return errHelped
	}
	return errUsage
}

// Main is the real entry point: it runs the subcommand named by args[0]
// until it finishes or ctx is cancelled.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	switch args[0] {
	case "--version", "-version", "-v":
		return runVersion(ctx, nil, stdout, stderr)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			usage(stdout)
			return nil
		}
		fmt.Fprintf(stderr, "iop: unknown command %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); !errors.Is(err, errHelped) {
		return err
	}
	return nil
}

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by the files that implement each subcommand.
var commands = map[string]command{}

// usage lists every registered command: those of commandOrder first, in
// that order, then any other by name (a command is never left out).
func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: iop <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := slices.Clone(commandOrder)
	var rest []string
	for name := range commands {
		if !slices.Contains(names, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(names, rest...) {
		if c, ok := commands[name]; ok {
			fmt.Fprintf(w, "  %-10s %s\n", name, c.summary)
		}
	}
}

// commandOrder is the order of the usage text.
var commandOrder = []string{"dev", "gateway", "node", "check", "status", "version"}

// signalContext ends on SIGINT or SIGTERM (a drain). SIGHUP is never
// fatal: the commands that have a configuration file reload it; the
// others ignore it.
func signalContext() (context.Context, context.CancelFunc) {
	signal.Ignore(syscall.SIGHUP)
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
