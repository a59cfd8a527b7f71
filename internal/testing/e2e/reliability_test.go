package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

// TestTruncationIsNeverSuccess is RELIABILITY.md R8 and R9 on both paths:
// an upstream that ends badly never produces a clean-looking answer, and
// one that ends cleanly with a finish_reason but no [DONE] is complete.
// After each, a normal request still succeeds.
func TestTruncationIsNeverSuccess(t *testing.T) {
	faults := []string{"cut-after-3", "malformed-at-2", "huge-line", "html-502", "no-done", "truncate-clean", "ok"}
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		var ps []nodeagent.ProviderConfig
		tn := c.WallProvider("tunnel", "openai", nodeagent.PathTunnel)
		nn := c.WallProvider("normalized", "openai", nodeagent.PathNormalized)
		for _, f := range faults {
			tn.Models = append(tn.Models, "t-"+f)
			nn.Models = append(nn.Models, "n-"+f)
		}
		ps = append(ps, tn, nn)
		return []NodeSpec{{ID: "node-a", Providers: ps}}
	})
	tests := []struct {
		fault      string
		tunnel     string // expected outcome on the tunnel path
		normalized string
	}{
		{"cut-after-3", "typed", "typed"},
		{"malformed-at-2", "complete-native", "complete"}, // tunnel: the upstream's bytes, unchanged; normalized: the event is skipped (counted), as real clients skip it
		{"huge-line", "complete", "complete"},
		{"html-502", "typed-502", "typed-502"},
		{"no-done", "finished-native", "complete"}, // tunnel: no synthetic [DONE] (WIRE.md §1.4); the finish chunk ends it
		{"truncate-clean", "typed", "typed"},
	}
	for _, tt := range tests {
		for _, path := range []string{"t", "n"} {
			want := map[string]string{"t": tt.tunnel, "n": tt.normalized}[path]
			model := path + "-" + tt.fault
			t.Run(model, func(t *testing.T) {
				c.Wall.SetFault(tt.fault)
				defer c.Wall.SetFault("")
				r := streamChat(t, c.URL, model)
				switch want {
				case "typed":
					if r.status != 200 || len(r.errors) != 1 || r.done != 0 {
						t.Fatalf("want one typed terminal: %+v", r)
					}
				case "typed-502":
					if r.status != 502 {
						t.Fatalf("want a typed 502: %+v", r)
					}
				case "finished-native":
					if r.status != 200 || r.finish != 1 || len(r.errors) != 0 {
						t.Fatalf("want a stream ended by its finish chunk: %+v", r)
					}
				case "complete", "complete-native":
					if r.status != 200 || r.done != 1 || len(r.errors) != 0 {
						t.Fatalf("want a complete stream: %+v", r)
					}
				}
				c.Wall.SetFault("")
				if r := streamChat(t, c.URL, path+"-ok"); r.done != 1 {
					t.Fatalf("the next request failed: %+v", r)
				}
			})
		}
	}
	// html-502 before commit is an OpenAI-shaped error, not the HTML page.
	c.Wall.SetFault("html-502")
	resp := post(t, c.URL+"/v1/chat/completions", `{"model":"t-html-502","messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp)
	c.Wall.SetFault("")
	var e struct{ Error struct{ Type, Code string } }
	if resp.StatusCode != 502 || json.Unmarshal([]byte(b), &e) != nil || e.Error.Code != "upstream_error" {
		t.Fatalf("html-502: %d %s", resp.StatusCode, b)
	}
	c.WaitIdle(t)
}

// TestRetryBudgetUnderMassStall is R7 at 20 concurrent requests: every
// primary stalls before its first token; replays in flight stay within
// max(3, ⌈0.2 × active⌉) and the rest fail fast with a typed 503.
func TestRetryBudgetUnderMassStall(t *testing.T) {
	p := startPair(t, "accept-silent", nil, func(a, b *nodeagent.ProviderConfig) { a.Capacity, b.Capacity = 64, 64 })
	p.wallB.TokenDelay = 150 * time.Millisecond // replays stay in flight ~1 s
	const n = 20
	var wg sync.WaitGroup
	results := make(chan sseResult, n)
	for range n {
		wg.Go(func() { results <- streamChat(t, p.URL, "m") })
	}
	wg.Wait()
	close(results)
	ok, budget := 0, 0
	for r := range results {
		switch {
		case r.status == 200 && r.done == 1:
			ok++
		case r.status == 503:
			budget++
		default:
			t.Fatalf("unexpected outcome %+v", r)
		}
	}
	// Least-load selection sends some first attempts straight to B; the
	// rest stalled on A and were either replayed on B or refused.
	stalled := len(p.wallA.Attempts())
	replays := len(p.wallB.Attempts()) - (n - stalled)
	maxReplays := 4 // max(3, ⌈0.2 × 20⌉), all concurrent: B holds each ~1 s
	if replays < 1 || replays > maxReplays || replays+budget != stalled || ok+budget != n {
		t.Fatalf("%d stalled on A: %d replayed, %d refused by the budget (%d ok); want ≤ %d replays", stalled, replays, budget, ok, maxReplays)
	}
	t.Logf("%d stalled: %d replays admitted, %d typed 503 retry_budget_exhausted", stalled, replays, budget)
}

// TestFastFailingProviderDoesNotAttractTraffic is R17: X answers 503 in
// milliseconds, Y answers 200 more slowly; least-load selection alone
// would keep feeding X (olla#144). Under steady load for 2 s, X is ejected
// after five consecutive 5xx and ≥ 95 % of requests succeed, served by Y.
func TestFastFailingProviderDoesNotAttractTraffic(t *testing.T) {
	var wallX *wall.Wall
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		var xURL, yURL string
		wallX, xURL = c.AddWall(t, "503-persist")
		_, yURL = c.AddWall(t, "")
		x := nodeagent.ProviderConfig{ID: "x", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: xURL + "/v1", Models: []string{"m"}, Capacity: 64}
		y := nodeagent.ProviderConfig{ID: "y", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: yURL + "/v1", Models: []string{"m"}, Capacity: 64}
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{x, y}}}
	})
	var mu sync.Mutex
	ok, total := 0, 0
	var wg sync.WaitGroup
	end := time.Now().Add(2 * time.Second)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(end) {
				resp := post(t, c.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
				readAll(t, resp)
				mu.Lock()
				total++
				if resp.StatusCode == 200 {
					ok++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if ok*100 < total*95 {
		t.Fatalf("%d of %d succeeded", ok, total)
	}
	if got := c.Metric(t, "iop_edge_outlier_ejections_total", nil); got < 1 {
		t.Fatalf("X never ejected (%v)", got)
	}
	if n := len(wallX.Attempts()); n > 20 {
		t.Fatalf("X still attracted %d of %d requests", n, total)
	}
	t.Logf("%d of %d requests succeeded; X saw %d attempts", ok, total, len(wallX.Attempts()))
}

// TestGracefulShutdown is R22: on shutdown new requests are refused,
// streams still open at the drain deadline get a typed terminal, and every
// lease is released.
func TestGracefulShutdown(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) { g.DrainTimeout = 300 * time.Millisecond }}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: 100 * time.Millisecond, MaxTokens: 200})}}}
	})
	results := make(chan sseResult, 3)
	for range 3 {
		go func() { results <- streamChat(t, c.URL, "iop-sim") }()
	}
	time.Sleep(400 * time.Millisecond) // the streams are open
	stopped := time.Now()
	go c.StopEdge()
	for range 3 {
		r := <-results
		if len(r.errors) != 1 || r.errors[0] != "server_shutting_down" || r.done != 0 {
			t.Fatalf("stream at shutdown: %+v", r)
		}
	}
	if d := time.Since(stopped); d > 3*time.Second {
		t.Fatalf("streams ended %v after shutdown began (drain 300ms)", d)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := http.Post(c.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`)); err == nil {
		t.Fatal("a new request was accepted after shutdown")
	}
	if n := c.Gateway.Pool().InUse(); n != 0 {
		t.Fatalf("%d leases held after shutdown", n)
	}
}
