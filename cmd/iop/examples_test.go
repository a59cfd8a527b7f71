package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
)

// startDev runs iop dev on free ports and returns its API and admin URLs.
func startDev(t *testing.T) (api, admin string) {
	t.Helper()
	return startDevConfig(t, defaultDevConfig())
}

// startDevConfig runs `iop dev` with cfg on free ports, until the test
// ends, and waits for it to be ready.
func startDevConfig(t *testing.T, cfg devConfig) (api, admin string) {
	t.Helper()
	cfg.Gateway.Listen, cfg.Gateway.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Gateway.Log.Level, cfg.Node.Log.Level = "error", "error"
	d := launchDev(t, cfg, io.Discard)
	t.Cleanup(func() { _ = d.stop() })
	wait.Until(t, func() bool {
		r, err := http.Get(d.admin + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
	return d.api, d.admin
}

// dev is an `iop dev` a test runs.
type dev struct {
	api, admin string       // admin: empty without an admin listener
	stop       func() error // ends it and returns what it returned
}

// launchDev starts `iop dev` with cfg, its log going to logs, and waits
// for its banner.
func launchDev(t *testing.T, cfg devConfig, logs io.Writer) *dev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &logbuf.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runDevConfig(ctx, cfg, out, logs) }()
	var once sync.Once
	var err error
	d := &dev{stop: func() error { once.Do(func() { cancel(); err = <-done }); return err }}
	wait.Until(t, func() bool { // the banner, written whole
		select {
		case err := <-done:
			t.Fatalf("iop dev ended: %v", err)
		default:
		}
		return strings.Contains(out.String(), "\n")
	})
	banner := out.String()
	if m := regexp.MustCompile(`OpenAI API on (http://[^ ]+)/v1 `).FindStringSubmatch(banner); m != nil {
		d.api = m[1]
	}
	if m := regexp.MustCompile(`admin on (http://\S+)`).FindStringSubmatch(banner); m != nil {
		d.admin = m[1]
	}
	if d.api == "" {
		t.Fatalf("iop dev's banner: %q", banner)
	}
	return d
}

// TestExamplesRunAgainstDev runs every program in examples/ against iop dev.
func TestExamplesRunAgainstDev(t *testing.T) {
	api, _ := startDev(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	jsModules := filepath.Join(root, "conformance", "testdata", "js", "node_modules")
	if _, err := os.Stat(jsModules); err != nil {
		t.Fatal("JavaScript clients are not installed: run make js-deps")
	}
	for _, dir := range []string{"node", "ollama"} {
		link := filepath.Join(root, "examples", dir, "node_modules")
		_ = os.Remove(link)
		if err := os.Symlink(jsModules, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(link) })
	}
	tests := []struct {
		name string
		cmd  []string
		dir  string
		want []string
	}{
		{"curl chat", []string{"sh", "examples/curl/chat.sh"}, root, []string{`"object":"chat.completion"`, "You said: Say hello"}},
		{"curl chat stream", []string{"sh", "examples/curl/chat-stream.sh"}, root, []string{"data: [DONE]", `"usage":{"prompt_tokens"`}},
		{"curl responses stream", []string{"sh", "examples/curl/responses-stream.sh"}, root, []string{"event: response.completed"}},
		{"curl ollama chat", []string{"sh", "examples/curl/ollama-chat.sh"}, root, []string{`"done":true`}},
		{"curl messages", []string{"sh", "examples/curl/messages.sh"}, root, []string{`"type":"message"`, "You said: Say hello", `"stop_reason":"end_turn"`}},
		{"curl audio", []string{"sh", "examples/curl/audio.sh"}, root, []string{`"text":"iop-sim heard 2444 bytes of audio in hello.wav."`}},
		{"curl structured", []string{"sh", "examples/curl/structured.sh"}, root, []string{`"content":"{\"name\":\"Paris\"}"`}},
		{"openai-go", []string{"go", "run", "./examples/openai-go"}, root, []string{"You said: Say hello", "finish_reason=stop"}},
		{"node openai", []string{"node", "chat.mjs"}, filepath.Join(root, "examples", "node"), []string{"You said: Say hello", "finish_reason=stop"}},
		{"ollama-js", []string{"node", "chat.mjs"}, filepath.Join(root, "examples", "ollama"), []string{"models: iop-sim", "done_reason=stop"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, tt.cmd[0], tt.cmd[1:]...)
			cmd.Dir = tt.dir
			cmd.Env = append(os.Environ(), "IOP_URL="+api)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
