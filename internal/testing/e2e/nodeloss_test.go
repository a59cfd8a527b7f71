package e2e

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/nodeagent"
)

// TestNodeLossTerminals is RELIABILITY.md R10: when a node's connection
// dies, every committed stream on it gets a typed terminal within 250 ms,
// uncommitted ones are replayed on another node, and every lease is
// released once.
func TestNodeLossTerminals(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Providers = []pool.ProviderPolicy{{ID: "node-a/a", Priority: 10}}
	}}, func(c *Cluster) []NodeSpec {
		slow := Sim("a", nodeagent.SimConfig{TokenLatency: 100 * time.Millisecond, MaxTokens: 200})
		silent := Sim("a2", nodeagent.SimConfig{StallBeforeFirst: true})
		silent.Models = []string{"pre"}
		other := Sim("b", nodeagent.SimConfig{})
		other2 := Sim("b2", nodeagent.SimConfig{})
		other2.Models = []string{"pre"}
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{slow, silent}}, {ID: "node-b", Providers: []nodeagent.ProviderConfig{other, other2}}}
	})
	type result struct {
		sse   sseResult
		endAt time.Time
	}
	const n = 4
	results := make(chan result, n+1)
	var wg sync.WaitGroup
	started := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			resp := post(t, c.URL+"/v1/chat/completions", `{"model":"iop-sim","stream":true,"messages":[{"role":"user","content":"a long story please"}]}`)
			started <- struct{}{}
			r := collect(resp)
			results <- result{sse: r, endAt: time.Now()}
		})
	}
	for range n {
		<-started
	}
	// An uncommitted request on the same node: its provider has not
	// produced a byte yet.
	var pre sseResult
	wg.Go(func() { pre = streamChat(t, c.URL, "pre") })
	time.Sleep(300 * time.Millisecond)
	committedOnA := 0
	for _, s := range c.Gateway.Pool().Snapshot() {
		if s.LocalProviderID == "a" {
			committedOnA = s.InFlight
		}
	}
	killed := time.Now()
	c.KillNodeLink("node-a")
	wg.Wait()
	close(results)
	var worst time.Duration
	for r := range results {
		if r.sse.status != 200 {
			t.Fatalf("status %d", r.sse.status)
		}
		onA := len(r.sse.errors) > 0
		if onA {
			if r.sse.errors[0] != "upstream_error" || r.sse.done != 0 {
				t.Fatalf("terminal %+v", r.sse)
			}
			worst = max(worst, r.endAt.Sub(killed))
		} else if r.sse.done != 1 {
			t.Fatalf("stream neither completed nor typed: %+v", r.sse)
		}
	}
	if committedOnA == 0 {
		t.Fatal("no stream was on the killed node")
	}
	t.Logf("%d committed streams on the killed node: worst terminal %v after the kill", committedOnA, worst)
	if worst > 250*time.Millisecond {
		t.Fatalf("typed terminal took %v, want ≤ 250ms", worst)
	}
	if pre.status != 200 || pre.done != 1 || len(pre.errors) != 0 {
		t.Fatalf("uncommitted request was not replayed cleanly: %+v", pre)
	}
	c.WaitIdle(t)
}

func collect(resp *http.Response) sseResult {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := sseResult{status: resp.StatusCode}
	for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok {
			continue
		}
		switch {
		case data == "[DONE]":
			r.done++
		case strings.HasPrefix(data, `{"error":`):
			var code string
			if i := strings.Index(data, `"code":"`); i >= 0 {
				code = data[i+8:]
				code = code[:strings.IndexByte(code, '"')]
			}
			r.errors = append(r.errors, code)
		}
	}
	return r
}
