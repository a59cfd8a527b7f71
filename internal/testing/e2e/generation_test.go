package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/nodeagent"
)

// TestRequestKeepsItsGeneration (issue 27): a request in flight across a
// reload runs to its end under the configuration it started with — its
// retry policy, its alias table (and queue settings: the same dispatch
// request carries them), its runtime configuration — while a request
// after the reload runs under the new one. The request: model "m", an
// alias of the wall's "503-persist", 2 retries 300 ms apart. The reload,
// after its first attempt: "m" → the wall's "ok", no retries.
func TestRequestKeepsItsGeneration(t *testing.T) {
	retries, backoff := 2, 300*time.Millisecond
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "m", Targets: []pool.ModelTarget{{Model: "503-persist"}}}}
		g.Retry.Retries, g.Retry.BackoffBase, g.Retry.BackoffMax = &retries, &backoff, &backoff
	}}, func(c *Cluster) []NodeSpec {
		c.Wall.Models = []string{"503-persist", "ok"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", nodeagent.PathTunnel, "503-persist", "ok")}}}
	})
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(c.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	wait.Until(t, func() bool { return len(c.Wall.AttemptsFor("503-persist")) == 1 })
	cfg := c.Gateway.Config()
	none := 0
	cfg.Models = []gateway.ModelConfig{{Name: "m", Targets: []pool.ModelTarget{{Model: "ok"}}}}
	cfg.Retry.Retries = &none
	if err := c.Gateway.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || len(c.Wall.AttemptsFor("503-persist")) != 3 || len(c.Wall.AttemptsFor("ok")) != 0 {
		t.Fatalf("the request in flight: %d %s; upstream saw 503-persist ×%d, ok ×%d (want 503 after its own 3 attempts)",
			resp.StatusCode, body, len(c.Wall.AttemptsFor("503-persist")), len(c.Wall.AttemptsFor("ok")))
	}
	resp, err := http.Post(c.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 || len(c.Wall.AttemptsFor("ok")) != 1 {
		t.Fatalf("a request after the reload: %d %s", resp.StatusCode, body)
	}
}
