package main

import (
	"io"
	"net/http"
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
			logs := &logbuf.Buffer{}
			d := launchDev(t, cfg, logs)
			defer d.stop()
			wait.Until(t, func() bool { // the bundled node's models are served
				resp, err := http.Post(d.api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					return false
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode == 200
			})
			// The answered request's line (iop dev logs text); a 503 before
			// the node connected is logged at warn, and written at once.
			answered := func() bool {
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "msg=request ") && strings.Contains(l, " status=200 ") {
						return true
					}
				}
				return false
			}
			if tc.interval == 10*time.Second {
				if answered() {
					t.Fatalf("the access line was written before the interval:\n%s", logs.String())
				}
				if err := d.stop(); err != nil {
					t.Fatal(err)
				}
				if !answered() {
					t.Fatalf("the held access line was lost at exit:\n%s", logs.String())
				}
				return
			}
			wait.Until(t, answered)
		})
	}
}
