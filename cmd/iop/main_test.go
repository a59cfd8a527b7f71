package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestMainVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := Main(context.Background(), []string{"version"}, &out, &errOut); err != nil {
		t.Fatalf("Main(version) = %v; stderr %q", err, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "iop "+version+" (go") {
		t.Fatalf("version output %q", out.String())
	}
}

func TestMainUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"bogus"}, {"version", "-bogus"}} {
		var out, errOut bytes.Buffer
		err := Main(context.Background(), args, &out, &errOut)
		if !errors.Is(err, errUsage) {
			t.Errorf("Main(%q) = %v, want errUsage", args, err)
		}
		if exitCode(err) != 2 {
			t.Errorf("exit code %d, want 2", exitCode(err))
		}
		if errOut.Len() == 0 {
			t.Errorf("Main(%q) printed no usage to stderr", args)
		}
	}
	var out bytes.Buffer
	if err := Main(context.Background(), []string{"help"}, &out, &out); err != nil || !strings.Contains(out.String(), "version") {
		t.Fatalf("help: %v %q", err, out.String())
	}
}
