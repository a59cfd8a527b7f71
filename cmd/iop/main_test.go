package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iopgw/iop/internal/konfig"
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

// TestDevServesAndStatusShowsIt runs `iop dev` on free ports, asks it for a
// chat completion, and reads it back with `iop status`.
func TestDevServesAndStatusShowsIt(t *testing.T) {
	api, admin := startDev(t)
	resp, err := http.Post(api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "iop-sim") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var status bytes.Buffer
	if err := Main(context.Background(), []string{"status", "--admin", admin}, &status, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "dev-node/sim-a") || !strings.Contains(status.String(), "dev-node/sim-b") || !strings.Contains(status.String(), "available") {
		t.Fatalf("status:\n%s", status.String())
	}
}

func TestDevConfigsLoad(t *testing.T) {
	for _, f := range []string{"dev-replay.yaml", "dev-stall-recovery.yaml"} {
		cfg := defaultDevConfig()
		if err := konfig.Load("../../configs/"+f, &cfg); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(cfg.Node.Providers) != 2 || len(cfg.Gateway.Providers) != 1 {
			t.Fatalf("%s: %+v", f, cfg)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	if err := Main(context.Background(), []string{"--version"}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "iop ") {
		t.Fatalf("--version: %v %q", err, out.String())
	}
	var help bytes.Buffer
	if err := Main(context.Background(), []string{"--help"}, &help, &help); err != nil {
		t.Fatalf("--help: %v", err)
	}
	for name := range commands {
		if !strings.Contains(help.String(), "\n  "+name+" ") {
			t.Errorf("--help does not list %s:\n%s", name, help.String())
		}
	}
	for _, cmd := range []string{"gateway", "node", "dev", "status", "version", "check"} {
		if err := Main(context.Background(), []string{cmd, "--help"}, io.Discard, io.Discard); err != nil {
			t.Errorf("%s --help: %v, want success", cmd, err)
		}
	}
	if err := Main(context.Background(), []string{"gateway", "--no-such-flag"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Fatalf("a wrong flag: %v", err)
	}
}

// TestCheck: `iop check` accepts every shipped configuration (exit 0) and
// rejects a mistaken one with exit 1, naming the key and the file.
func TestCheck(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) < 4 {
		t.Fatalf("configs: %v", files)
	}
	for _, f := range files {
		var out bytes.Buffer
		if err := Main(context.Background(), []string{"check", "--config", f}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "valid") {
			t.Errorf("check %s: %v %q", f, err, out.String())
		}
	}
	bad := filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(bad, []byte("nodes: [{id: n, token: t}]\nmodels: [{name: a, fallbacks: [b]}, {name: b, fallbacks: [a]}]\nstreamgate: {max_attempts: -3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Main(context.Background(), []string{"check", "--config", bad}, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "fallback cycle") || !strings.Contains(err.Error(), "streamgate.max_attempts") ||
		!strings.Contains(err.Error(), bad) {
		t.Fatalf("check of a bad file: %v (exit %d)", err, exitCode(err))
	}
}
