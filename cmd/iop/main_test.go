package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

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
	cfg := defaultDevConfig()
	cfg.Gateway.Listen, cfg.Gateway.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Gateway.Log.Level, cfg.Node.Log.Level = "error", "error"
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runDevConfig(ctx, cfg, out, io.Discard) }()
	var api, admin string
	deadline := time.Now().Add(10 * time.Second)
	for api == "" {
		if time.Now().After(deadline) {
			t.Fatalf("dev did not start: %q", out.String())
		}
		if m := regexp.MustCompile(`OpenAI API on (http://[^ ]+)/v1 .* admin on (http://\S+)`).FindStringSubmatch(out.String()); m != nil {
			api, admin = m[1], m[2]
		}
		time.Sleep(10 * time.Millisecond)
	}
	var status bytes.Buffer
	for {
		resp, err := http.Post(api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(b), "iop-sim") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer from iop dev")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := Main(context.Background(), []string{"status", "--admin", admin}, &status, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "dev-node/sim-a") || !strings.Contains(status.String(), "dev-node/sim-b") || !strings.Contains(status.String(), "available") {
		t.Fatalf("status:\n%s", status.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
