package e2e

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/internal/testing/rogue"
	"github.com/iopgw/iop/nodeagent"
	"github.com/iopgw/iop/wire"
)

// rogueProvider advertises a tunnel provider of model m with the given
// claims.
func rogueProvider(id, m string, capacity int32, stallMS int64) *wire.ProviderAdvertisement {
	return &wire.ProviderAdvertisement{ProviderId: id, Adapter: "openai", Target: m, InstanceKey: "rogue", Models: []string{m},
		Capacity: capacity, ResponseStallTimeoutMs: stallMS, ExecutionPath: "provider_tunnel", SupportsTunnel: true}
}

// startRogue connects a rogue node "rogue" that answers every dispatch
// with respond.
func startRogue(t *testing.T, c *Cluster, ads []*wire.ProviderAdvertisement, respond rogue.Respond) *rogue.Node {
	t.Helper()
	conn, err := rogue.Dial(c.DialNodePort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	before := len(c.Gateway.Pool().Snapshot())
	n, err := rogue.Connect(ctx, conn, "token-rogue", "rogue", ads, respond)
	if err != nil {
		t.Fatal(err)
	}
	c.WaitProviders(t, before+len(ads))
	return n
}

// legitLatency runs requests to the legitimate node while attack runs and
// returns the slowest: a rogue node must not slow other traffic.
func legitLatency(t *testing.T, c *Cluster, attack func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	var worst time.Duration
	go func() {
		defer close(done)
		for range 20 {
			start := time.Now()
			if r := streamChat(t, c.URL, "iop-sim"); r.status != 200 || r.done != 1 {
				t.Errorf("a legitimate request during the attack: %+v", r)
			}
			worst = max(worst, time.Since(start))
		}
	}()
	attack()
	<-done
	return worst
}

func hostileCluster(t *testing.T) *Cluster {
	legit := NodeSpec{ID: "legit", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}
	return Start(t, Options{Nodes: []NodeSpec{legit}, Gateway: func(cfg *gateway.Config) {
		cfg.Nodes = append(cfg.Nodes, fleet.NodeConfig{ID: "rogue", Token: "token-rogue"})
		cfg.StreamGate.HoldMaxDelay = 20 * time.Millisecond // held output is released from a timer goroutine
		cfg.NodeLimits.MaxStallTimeout = 2 * time.Second
		cfg.StreamGate.BackstopMargin = time.Second
	}}, nil)
}

func chatStream(t *testing.T, url, model string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const okStream = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

// TestRogueNodeResponses: statuses a client must never see, framing and
// cookie headers, and a message over the edge's limit — the edge stays
// up, the client gets a typed 502 or a filtered response, and the next
// request is served.
func TestRogueNodeResponses(t *testing.T) {
	c := hostileCluster(t)
	answers := map[string][]*wire.ProviderTunnelFrame{
		"status-42":  {{Type: "response_start", Status: 42}, {Type: "body", Body: []byte(okStream)}, {Type: "end"}},
		"status-101": {{Type: "response_start", Status: 101}, {Type: "end"}},
		"headers": {{Type: "response_start", Status: 200, Headers: []*wire.Header{{Name: "Content-Type", Values: []string{"text/event-stream"}},
			{Name: "Transfer-Encoding", Values: []string{"chunked", "chunked"}}, {Name: "Content-Length", Values: []string{"3"}},
			{Name: "Set-Cookie", Values: []string{"session=stolen"}}, {Name: "Location", Values: []string{"http://evil.example/"}},
			{Name: "Server", Values: []string{"rogue/1.0"}}}}, {Type: "body", Body: []byte(okStream)}, {Type: "end"}},
		"oversized": {{Type: "response_start", Status: 200, Headers: []*wire.Header{{Name: "Content-Type", Values: []string{"text/event-stream"}}}},
			{Type: "body", Body: make([]byte, 2<<20)}, {Type: "end"}},
	}
	var ads []*wire.ProviderAdvertisement
	for m := range answers {
		ads = append(ads, rogueProvider("p-"+m, m, 4, 1000))
	}
	startRogue(t, c, ads, func(down *wire.AttemptDown, send func(*wire.AttemptUp) error) error {
		for _, f := range answers[down.GetTunnel().GetModel()] {
			if err := send(rogue.Frame(f)); err != nil {
				return err
			}
		}
		return nil
	})
	worst := legitLatency(t, c, func() {
		for range 5 {
			for _, m := range []string{"status-42", "status-101", "oversized"} {
				code, _, body := chatStream(t, c.URL, m)
				if code != http.StatusBadGateway && code != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
					t.Errorf("%s: client got %d %q", m, code, body)
				}
			}
		}
	})
	if worst > time.Second {
		t.Errorf("legitimate requests took up to %v during the attacks", worst)
	}
	t.Logf("legitimate requests during the rogue responses: slowest %v", worst.Round(time.Millisecond))
	code, h, body := chatStream(t, c.URL, "headers")
	if code != 200 || body != okStream || h.Get("Set-Cookie") != "" || h.Get("Location") != "" || h.Get("Server") == "rogue/1.0" {
		t.Errorf("headers: %d %v %q", code, h, body)
	}
	if code, _, body := chatStream(t, c.URL, "headers"); code != 200 || body != okStream {
		t.Fatalf("the edge did not keep serving: %d %q", code, body)
	}
	if n := c.Metric(t, "iop_edge_lease_double_release_total", nil); n != 0 {
		t.Fatalf("%v double releases", n)
	}
}

// TestRogueNodeClaims: what a node claims of the edge's resources is
// bounded — capacity into [1, max], the stall timeout to the edge's cap
// (so a silent rogue cannot hold a request forever), and an oversized
// advertisement is refused before it costs memory.
func TestRogueNodeClaims(t *testing.T) {
	c := hostileCluster(t)
	silentDone := make(chan struct{})
	t.Cleanup(func() { close(silentDone) })
	startRogue(t, c, []*wire.ProviderAdvertisement{rogueProvider("greedy", "g", 0, 9e12)}, func(*wire.AttemptDown, func(*wire.AttemptUp) error) error {
		<-silentDone // accepts the work and never answers
		return nil
	})
	for _, p := range c.Gateway.Pool().Snapshot() {
		if p.NodeID == "rogue" && p.ConfiguredCapacity != 1 {
			t.Fatalf("claimed capacity 0 became %+v", p)
		}
	}
	start := time.Now()
	code, _, body := chatStream(t, c.URL, "g")
	// The backstop is the capped stall timeout (2 s here) plus the edge's
	// margin (1 s here): bounded, where 9e12 ms would never end.
	if took := time.Since(start); code != http.StatusGatewayTimeout && code != http.StatusBadGateway || took > 10*time.Second {
		t.Fatalf("silent rogue: %d %q after %v", code, body, took)
	}

	conn, err := rogue.Dial(c.DialNodePort)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var many []*wire.ProviderAdvertisement
	for i := range 100_000 {
		many = append(many, rogueProvider("p"+strings.Repeat("x", i%8)+string(rune('a'+i%26)), "m", 1, 1000))
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = rogue.Connect(context.Background(), conn, "token-rogue", "rogue", many, nil)
	if code := status.Code(err); code != codes.ResourceExhausted && code != codes.PermissionDenied {
		t.Fatalf("an advertisement of 100,000 providers: %v", err)
	}
	if snap := c.Gateway.Pool().Snapshot(); len(snap) > 2 {
		t.Fatalf("%d providers pooled after the oversized advertisement", len(snap))
	}
}

// TestUnsolicitedAttemptStreamsAreRefused: attempt streams a node opens
// with no dispatch waiting are refused before a message is read, past
// the few a connection may park; those must open as parked streams of the
// node's current connection, and anything else is refused.
func TestUnsolicitedAttemptStreamsAreRefused(t *testing.T) {
	c := hostileCluster(t)
	n := startRogue(t, c, []*wire.ProviderAdvertisement{rogueProvider("p", "m", 4, 1000)}, nil)
	// The edge's connect probe is the one solicited command: wait until it
	// gave up on the rogue (which never answers) before the attack.
	for deadline := time.Now().Add(10 * time.Second); !probed(c, "rogue/p"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connect probe never settled")
		}
	}
	ctx := n.Session.Context()
	worst := legitLatency(t, c, func() {
		for range 200 {
			st, err := n.Client.Attempt(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{ToolCalls: make([]*wire.ToolCallDelta, 1000)}}})
			if _, err := st.Recv(); status.Code(err) != codes.ResourceExhausted && status.Code(err) != codes.InvalidArgument {
				t.Fatalf("unsolicited attempt stream: %v", err)
			}
		}
	})
	if worst > time.Second {
		t.Errorf("legitimate requests took up to %v during the attack", worst)
	}
	t.Logf("legitimate requests during 200 unsolicited attempt streams: slowest %v", worst.Round(time.Millisecond))
}

// probed reports whether the edge's connect probe of provider finished.
func probed(c *Cluster, provider string) bool {
	for _, p := range c.Gateway.Pool().Snapshot() {
		if p.ProviderID == provider && p.Probe != "" {
			return true
		}
	}
	return false
}

// TestRogueNodeBatches: coalesced messages are untrusted input like any
// other — items after a batch's terminal are never delivered, a batch
// mixing events and frames ends the attempt as a link failure, and empty
// batches carry nothing (the attempt still ends at its backstop).
func TestRogueNodeBatches(t *testing.T) {
	c := hostileCluster(t)
	sse := []*wire.Header{{Name: "Content-Type", Values: []string{"text/event-stream"}}}
	batch := func(fs ...*wire.ProviderTunnelFrame) *wire.AttemptUp {
		return &wire.AttemptUp{Msg: &wire.AttemptUp_Batch{Batch: &wire.UpBatch{Frames: fs}}}
	}
	answers := map[string][]*wire.AttemptUp{
		"after-end": {batch(&wire.ProviderTunnelFrame{Type: "response_start", Status: 200, Headers: sse},
			&wire.ProviderTunnelFrame{Type: "body", Body: []byte(okStream)}, &wire.ProviderTunnelFrame{Type: "end"},
			&wire.ProviderTunnelFrame{Type: "body", Body: []byte("data: {\"smuggled\":true}\n\n")}, &wire.ProviderTunnelFrame{Type: "end"})},
		"mixed": {{Msg: &wire.AttemptUp_Batch{Batch: &wire.UpBatch{Frames: []*wire.ProviderTunnelFrame{{Type: "response_start", Status: 200, Headers: sse}},
			Events: []*wire.RunEvent{{Type: "complete"}}}}}},
		"empty": {batch(), batch(), rogue.Frame(&wire.ProviderTunnelFrame{Type: "response_start", Status: 200, Headers: sse}), batch(),
			batch(&wire.ProviderTunnelFrame{Type: "body", Body: []byte(okStream)}, &wire.ProviderTunnelFrame{Type: "end"})},
	}
	var ads []*wire.ProviderAdvertisement
	for m := range answers {
		ads = append(ads, rogueProvider("p-"+m, m, 4, 1000))
	}
	startRogue(t, c, ads, func(down *wire.AttemptDown, send func(*wire.AttemptUp) error) error {
		for _, m := range answers[down.GetTunnel().GetModel()] {
			if err := send(m); err != nil {
				return err
			}
		}
		return nil
	})
	for _, m := range []string{"after-end", "empty"} {
		if code, _, body := chatStream(t, c.URL, m); code != 200 || body != okStream {
			t.Errorf("%s: client got %d %q, want exactly the stream before the terminal", m, code, body)
		}
	}
	if code, _, body := chatStream(t, c.URL, "mixed"); code != http.StatusBadGateway || !strings.Contains(body, `"error"`) {
		t.Errorf("mixed: client got %d %q, want a typed 502", code, body)
	}
	if n := c.Metric(t, "iop_edge_lease_double_release_total", nil); n != 0 {
		t.Fatalf("%v double releases", n)
	}
}
