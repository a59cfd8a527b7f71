package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
)

// TestDevLogFlush: the access line of a request is held (log.flush_interval)
// and written within the interval, or when the process stops — never lost
// at a clean exit.
func TestDevLogFlush(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"interval", 50 * time.Millisecond}, {"exit", 10 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultDevConfig()
			cfg.Gateway.Listen, cfg.Gateway.AdminListen = "127.0.0.1:0", ""
			cfg.Gateway.Log.Level, cfg.Gateway.Log.FlushInterval = "info", tc.interval
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out, logs := &logbuf.Buffer{}, &logbuf.Buffer{}
			done := make(chan error, 1)
			go func() { done <- runDevConfig(ctx, cfg, out, logs) }()
			var api string
			started := regexp.MustCompile(`OpenAI API on (http://[^ ]+)/v1`)
			wait.Until(t, func() bool {
				select {
				case err := <-done:
					t.Fatalf("iop dev ended: %v\n%s", err, logs.String())
				default:
				}
				if m := started.FindStringSubmatch(out.String()); m != nil {
					api = m[1]
				}
				return api != ""
			})
			wait.Until(t, func() bool { // the bundled node's models are served
				resp, err := http.Post(api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					return false
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode == 200
			})
			line := "msg=request " // iop dev logs text
			if tc.interval == 10*time.Second {
				if strings.Contains(logs.String(), line) {
					t.Fatalf("the access line was written before the interval:\n%s", logs.String())
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(logs.String(), line) {
					t.Fatalf("the held access line was lost at exit:\n%s", logs.String())
				}
				return
			}
			wait.Until(t, func() bool { return strings.Contains(logs.String(), line) })
			cancel()
			<-done
		})
	}
}
