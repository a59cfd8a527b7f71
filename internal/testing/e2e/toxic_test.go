package e2e

import (
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/keepalive"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/nodeagent"
	"github.com/iopgw/iop/wire"
)

// toxicLink puts an embedded toxiproxy between node-a and the edge over
// real TCP.
func toxicLink(t *testing.T, c *Cluster) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "node-link", "127.0.0.1:0", c.nodeAddr)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, json string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(json)); err != nil {
		t.Fatal(err)
	}
}

// startStreams opens n slow streams on node-a's provider and waits until
// each has its first token.
func startStreams(t *testing.T, c *Cluster, n int) chan sseResult {
	t.Helper()
	out := make(chan sseResult, n)
	started := make(chan struct{}, n)
	for range n {
		go func() {
			resp := post(t, c.URL+"/v1/chat/completions", `{"model":"slow","stream":true,"messages":[{"role":"user","content":"a long story"}]}`)
			started <- struct{}{}
			out <- collect(resp)
		}()
	}
	for range n {
		<-started
	}
	time.Sleep(200 * time.Millisecond)
	return out
}

func slowNodeCluster(t *testing.T) (*Cluster, *toxiproxy.Proxy) {
	t.Helper()
	var p *toxiproxy.Proxy
	c := Start(t, Options{TCPNodeLink: true, Gateway: func(g *gateway.Config) {
		g.Nodes = append(g.Nodes, fleet.NodeConfig{ID: "node-a", Token: "token-node-a"})
	}}, nil)
	p = toxicLink(t, c)
	slow := Sim("slow", nodeagent.SimConfig{TokenLatency: 100 * time.Millisecond, MaxTokens: 200})
	slow.Models = []string{"slow"}
	c.StartNode(t, NodeSpec{ID: "node-a", Providers: []nodeagent.ProviderConfig{slow},
		Configure: func(n *nodeagent.Config) { n.Edges[0].Address = p.Listen }})
	c.WaitProviders(t, 1)
	return c, p
}

// TestToxicBlackHole is R11 over real TCP: toxiproxy black-holes the node
// link in both directions (timeout toxic, no FIN or RST) while streams
// are in flight. With the edge keepalive at 1 s + 1 s the edge drops the
// node within Time + Timeout + 1 s, and every in-flight stream gets a
// typed terminal, not a hang.
func TestToxicBlackHole(t *testing.T) {
	saved := wire.EdgeKeepalive
	wire.EdgeKeepalive = keepalive.ServerParameters{Time: time.Second, Timeout: time.Second}
	t.Cleanup(func() { wire.EdgeKeepalive = saved })
	c, p := slowNodeCluster(t)
	streams := startStreams(t, c, 3)
	addToxic(t, p, `{"name":"hole-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
	addToxic(t, p, `{"name":"hole-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	start := time.Now()
	for len(c.Gateway.Hub().Nodes()) > 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the edge never noticed the black-holed node")
		}
		time.Sleep(10 * time.Millisecond)
	}
	detected := time.Since(start)
	if limit := 3 * time.Second; detected > limit {
		t.Fatalf("black hole detected after %v, want ≤ %v", detected, limit)
	}
	for range 3 {
		r := <-streams
		if r.status != 200 || len(r.errors) != 1 || r.done != 0 {
			t.Fatalf("in-flight stream after the black hole: %+v", r)
		}
	}
	ended := time.Since(start)
	t.Logf("black hole over TCP: node dropped after %v, in-flight streams ended with a typed terminal by %v", detected, ended)
	c.WaitIdle(t)
}

// TestToxicResetPeer is R10 over real TCP: toxiproxy resets the node link
// (RST) under in-flight streams; each gets a typed terminal promptly and
// the node comes back once the link heals.
func TestToxicResetPeer(t *testing.T) {
	c, p := slowNodeCluster(t)
	oldGen := c.Gateway.Pool().Snapshot()[0].ConnectionGeneration
	streams := startStreams(t, c, 3)
	start := time.Now()
	addToxic(t, p, `{"name":"rst","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`)
	for range 3 {
		r := <-streams
		if r.status != 200 || len(r.errors) != 1 || r.done != 0 {
			t.Fatalf("in-flight stream after the reset: %+v", r)
		}
	}
	ended := time.Since(start)
	if ended > time.Second {
		t.Fatalf("typed terminals %v after the reset", ended)
	}
	if err := p.Toxics.RemoveToxic(t.Context(), "rst"); err != nil {
		t.Fatal(err)
	}
	// The node's new session, not the old one the edge may not have
	// dropped yet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s := c.Gateway.Pool().Snapshot(); len(s) == 1 && s[0].ConnectionGeneration != oldGen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not come back: %+v", c.Gateway.Pool().Snapshot())
		}
	}
	resp := post(t, c.URL+"/v1/chat/completions", `{"model":"slow","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
	if r := collect(resp); r.status != 200 || r.done != 1 {
		t.Fatalf("after the link healed: %+v", r)
	}
	t.Logf("reset over TCP: typed terminals on every in-flight stream within %v; node back after the toxic was removed", ended)
	c.WaitIdle(t)
}

// TestToxicLatency: 50 ms of latency each way on the node link slows
// streams but breaks nothing.
func TestToxicLatency(t *testing.T) {
	c, p := slowNodeCluster(t)
	addToxic(t, p, `{"name":"lag-up","type":"latency","stream":"upstream","attributes":{"latency":50}}`)
	addToxic(t, p, `{"name":"lag-down","type":"latency","stream":"downstream","attributes":{"latency":50}}`)
	t0 := time.Now()
	resp := post(t, c.URL+"/v1/chat/completions", `{"model":"slow","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	r := collect(resp)
	if r.status != 200 || r.done != 1 || len(r.errors) != 0 {
		t.Fatalf("stream over a 50 ms link: %+v", r)
	}
	if d := time.Since(t0); d < 100*time.Millisecond {
		t.Fatalf("the latency toxic did not apply (%v)", d)
	}
}
