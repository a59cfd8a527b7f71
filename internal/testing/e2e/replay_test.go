package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

// pair is a cluster whose model "m" is served by two tunnel providers on
// their own walls: A (preferred, scripted with faultA) and B (healthy).
type pair struct {
	*Cluster
	wallA, wallB *wall.Wall
}

func startPair(t *testing.T, faultA string, gw func(*gateway.Config), tweak func(a, b *nodeagent.ProviderConfig)) *pair {
	p := &pair{}
	p.Cluster = Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Providers = []pool.ProviderPolicy{{ID: "node-a/a", Priority: 10}}
		if gw != nil {
			gw(g)
		}
	}}, func(c *Cluster) []NodeSpec {
		var urlA, urlB string
		p.wallA, urlA = c.AddWall(t, faultA)
		p.wallB, urlB = c.AddWall(t, "")
		a := nodeagent.ProviderConfig{ID: "a", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: urlA + "/v1", Models: []string{"m"}, Capacity: 8, ResponseStallTimeoutMS: 300}
		b := nodeagent.ProviderConfig{ID: "b", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: urlB + "/v1", Models: []string{"m"}, Capacity: 8}
		if tweak != nil {
			tweak(&a, &b)
		}
		return []NodeSpec{
			{ID: "node-a", Providers: []nodeagent.ProviderConfig{a}, Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = 200 * time.Millisecond }},
			{ID: "node-b", Providers: []nodeagent.ProviderConfig{b}},
		}
	})
	return p
}

type sseResult struct {
	status    int
	events    []string
	text      string
	roles     int
	finish    int
	done      int
	errors    []string
	malformed int
	firstAt   time.Time
}

// streamChat posts a streaming chat request and collects the SSE events.
func streamChat(t *testing.T, url, model string) sseResult {
	t.Helper()
	return streamChatWith(t, url, model, nil)
}

// streamChatWith is streamChat with request headers.
func streamChatWith(t *testing.T, url, model string, hdr map[string]string) sseResult {
	t.Helper()
	return readSSE(postWith(t, url+"/v1/chat/completions", streamChatBody(model), hdr))
}

// streamChatBody is streamChat's request body for model.
func streamChatBody(model string) string {
	return `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
}

// readSSE reads a streamed chat answer to its end and parses its events.
func readSSE(resp *http.Response) sseResult {
	defer resp.Body.Close()
	r := sseResult{status: resp.StatusCode}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(chunk)
		if n > 0 && r.firstAt.IsZero() {
			r.firstAt = time.Now()
		}
		buf = append(buf, chunk[:n]...)
		if err != nil {
			break
		}
	}
	for _, ev := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok {
			continue
		}
		r.events = append(r.events, data)
		if data == "[DONE]" {
			r.done++
			continue
		}
		var c struct {
			Error   *struct{ Code, Type, Message string } `json:"error"`
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			r.malformed++
			continue
		}
		if c.Error != nil {
			r.errors = append(r.errors, c.Error.Code)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role != "" {
				r.roles++
			}
			if ch.Delta.Content != nil {
				r.text += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				r.finish++
			}
		}
	}
	return r
}

// TestStallBeforeFirstTokenReplays is RELIABILITY.md R2: A accepts and
// never answers; the client gets one clean stream from B.
func TestStallBeforeFirstTokenReplays(t *testing.T) {
	p := startPair(t, "accept-silent", nil, nil)
	eligibleBefore := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "eligible", "commit_state": "transport_uncommitted"})
	redispatchedBefore := p.Metric(t, "iop_edge_liveness_recovery_results_total", map[string]string{"recovery_result": "redispatched"})
	replaysBefore := p.Metric(t, "iop_edge_replays_total", map[string]string{"reason": "pre_commit_stall"})

	r := streamChat(t, p.URL, "m")
	if r.status != 200 || r.roles != 1 || r.finish != 1 || r.done != 1 || len(r.errors) != 0 || r.text != p.wallB.Text() {
		t.Fatalf("client saw %+v", r)
	}
	a, b := p.wallA.Attempts(), p.wallB.Attempts()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("attempts A=%d B=%d, want 1 and 1", len(a), len(b))
	}
	select {
	case <-a[0].Done():
	case <-time.After(time.Second):
		t.Fatal("A's connection was not closed")
	}
	if !a[0].Cancelled() {
		t.Fatal("A finished instead of being cancelled")
	}
	// A's attempt ended (cancelled at the claim) before B's began.
	gap := b[0].Start.Sub(a[0].EndedAt())
	t.Logf("stall claim (A cancelled) → replacement dispatched to B: %v; first byte at client %v after A's cancel", gap, r.firstAt.Sub(a[0].EndedAt()))
	if gap > time.Second {
		t.Fatalf("replay dispatched %v after the claim", gap)
	}
	if d := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "eligible", "commit_state": "transport_uncommitted"}) - eligibleBefore; d != 1 {
		t.Fatalf("eligible +%v", d)
	}
	if d := p.Metric(t, "iop_edge_liveness_recovery_results_total", map[string]string{"recovery_result": "redispatched"}) - redispatchedBefore; d != 1 {
		t.Fatalf("redispatched +%v", d)
	}
	if d := p.Metric(t, "iop_edge_replays_total", map[string]string{"reason": "pre_commit_stall"}) - replaysBefore; d != 1 {
		t.Fatalf("replays +%v", d)
	}
	p.WaitIdle(t)
}

// TestStallWithOfficialClients: the same replay seen by openai-go.
func TestStallReplayWithOpenAIGo(t *testing.T) {
	p := startPair(t, "headers-then-silent", nil, nil)
	client := newOpenAIGo(p.Cluster)
	stream := client.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{Model: "m",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
	acc := oai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != p.wallB.Text() || len(p.wallB.Attempts()) != 1 {
		t.Fatalf("content %q, B attempts %d", acc.Choices[0].Message.Content, len(p.wallB.Attempts()))
	}
}

// TestStallAfterCommitTypedTerminal is R3: A stalls after 3 tokens; the
// client keeps exactly those tokens and gets one typed terminal; B is
// never contacted.
func TestStallAfterCommitTypedTerminal(t *testing.T) {
	p := startPair(t, "stall-after-3", nil, nil)
	postCommitBefore := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "post_commit"})
	r := streamChat(t, p.URL, "m")
	want := strings.Join(p.wallA.Tokens[:3], "")
	if r.status != 200 || r.text != want || len(r.errors) != 1 || r.errors[0] != "response_stalled" || r.done != 0 || r.finish != 0 {
		t.Fatalf("client saw %+v, want text %q then one response_stalled", r, want)
	}
	if n := len(p.wallB.Attempts()); n != 0 {
		t.Fatalf("B saw %d attempts", n)
	}
	if d := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "post_commit"}) - postCommitBefore; d != 1 {
		t.Fatalf("post_commit +%v", d)
	}
	p.WaitIdle(t)
}

// TestNonStreamingStallIs504: a non-streaming request never commits before
// its end; when no replay is possible (one provider) it is a 504.
func TestNonStreamingStallIs504(t *testing.T) {
	p := startPair(t, "accept-silent", func(g *gateway.Config) {
		g.Providers = append(g.Providers, pool.ProviderPolicy{ID: "node-b/b", Disabled: true})
	}, nil)
	resp := post(t, p.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp)
	var e struct{ Error struct{ Code, Type string } }
	_ = json.Unmarshal([]byte(b), &e)
	if resp.StatusCode != 504 || e.Error.Code != "response_stalled" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// TestToolSideEffectNoReplay is R5 with a commit hold: the tool call is
// held (not committed), yet its side effect forbids the replay.
func TestToolSideEffectNoReplay(t *testing.T) {
	p := startPair(t, "tool-call-then-stall", func(g *gateway.Config) {
		g.StreamGate.HoldMaxEvents, g.StreamGate.HoldMaxDelay = 1000, time.Minute
	}, nil)
	before := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "tool_side_effect"})
	resp := post(t, p.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"weather?"}]}`)
	b := readAll(t, resp)
	if resp.StatusCode != 504 || !strings.Contains(b, `"code":"response_stalled"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := len(p.wallB.Attempts()); n != 0 {
		t.Fatalf("B saw %d attempts", n)
	}
	if d := p.Metric(t, "iop_edge_liveness_recovery_eligibility_total", map[string]string{"eligibility": "tool_side_effect"}) - before; d != 1 {
		t.Fatalf("tool_side_effect +%v", d)
	}
}

// TestBudgetExhaustedNoReplay: with one attempt per request there is no
// room for a replay: a typed 504 naming the per-request cap (not the
// shared budget), fast, and B is never contacted.
func TestBudgetExhaustedNoReplay(t *testing.T) {
	p := startPair(t, "accept-silent", func(g *gateway.Config) { g.StreamGate.MaxAttempts = 1 }, nil)
	resp := post(t, p.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp)
	if resp.StatusCode != 504 || !strings.Contains(b, `"code":"max_attempts_exceeded"`) || !strings.Contains(b, "max_attempts = 1") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if n := len(p.wallB.Attempts()); n != 0 {
		t.Fatalf("B saw %d attempts", n)
	}
}

// TestCancelDuringReplaySelection is R6: a replay waits for B's only
// slot; the client leaves meanwhile; B is never contacted for it and every
// lease is released once.
func TestCancelDuringReplaySelection(t *testing.T) {
	p := startPair(t, "accept-silent", nil, func(_, b *nodeagent.ProviderConfig) { b.Capacity = 1 })
	p.wallB.TokenDelay = 300 * time.Millisecond
	first := make(chan sseResult, 1)
	go func() { first <- streamChat(t, p.URL, "m") }() // stalls on A, then holds B's slot ~1.5 s
	for deadline := time.Now().Add(3 * time.Second); len(p.wallB.Attempts()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached B")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	// The second request goes to A (B is full), stalls, and queues for B.
	deadline := time.Now().Add(3 * time.Second)
	for p.Gateway.Pool().QueueDepth("m") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the replay never queued for B")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if r := <-first; r.text != p.wallB.Text() {
		t.Fatalf("first request %+v", r)
	}
	if n := len(p.wallB.Attempts()); n != 1 {
		t.Fatalf("B saw %d attempts, want only the first request's", n)
	}
	if p.Gateway.Pool().QueueDepth("m") != 0 {
		t.Fatal("the cancelled replay is still queued")
	}
	p.WaitIdle(t)
}

// TestFailoverOn429 moves to B: the Retry-After is A's, so B is asked at
// once (the same provider would be asked again only after it).
func TestFailoverOn429(t *testing.T) {
	p := startPair(t, "429-retry-after", nil, nil)
	r := streamChat(t, p.URL, "m")
	if r.status != 200 || r.text != p.wallB.Text() || len(p.wallA.Attempts()) != 1 || len(p.wallB.Attempts()) != 1 {
		t.Fatalf("client %+v, A=%d B=%d", r, len(p.wallA.Attempts()), len(p.wallB.Attempts()))
	}
}

// TestContextLengthOneAttempt: a 400 is final, passed through verbatim,
// and never retried.
func TestContextLengthOneAttempt(t *testing.T) {
	p := startPair(t, "ctx-length-400", nil, nil)
	resp := post(t, p.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	b := readAll(t, resp)
	if resp.StatusCode != 400 || !strings.Contains(b, `"code":"context_length_exceeded"`) || resp.Header.Get("X-Request-Id") != "req_wall_ctx-length-400" {
		t.Fatalf("%d %s %v", resp.StatusCode, b, resp.Header)
	}
	if len(p.wallA.Attempts()) != 1 || len(p.wallB.Attempts()) != 0 {
		t.Fatalf("A=%d B=%d", len(p.wallA.Attempts()), len(p.wallB.Attempts()))
	}
}

// Test503ThenFallbackModel: model x always answers 503; its fallback y
// answers, and the response names y.
func Test503ThenFallbackModel(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "x", Fallbacks: []string{"y"}}}
	}}, func(c *Cluster) []NodeSpec {
		_, bad := c.AddWall(t, "503-persist")
		x := nodeagent.ProviderConfig{ID: "x", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: bad + "/v1", Models: []string{"x"}}
		y := c.WallProvider("y", "openai", nodeagent.PathTunnel, "y")
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{x, y}}}
	})
	client := newOpenAIGo(c)
	resp, err := client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "x",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "y" || resp.Choices[0].Message.Content != c.Wall.Text() {
		t.Fatalf("model %q content %q", resp.Model, resp.Choices[0].Message.Content)
	}
}

// TestMidStreamUpstreamErrorPassesThrough: the upstream's own in-band
// error on the tunnel is native bytes: passed through, no replay.
func TestMidStreamUpstreamErrorPassesThrough(t *testing.T) {
	p := startPair(t, "midstream-error", nil, nil)
	r := streamChat(t, p.URL, "m")
	if len(r.errors) != 1 || r.errors[0] != "server_error" || len(p.wallB.Attempts()) != 0 {
		t.Fatalf("client %+v", r)
	}
}

// TestAbruptUpstreamEndIsNeverTidy: the upstream resets mid-stream after
// commit; the client gets a typed terminal, not a clean end.
func TestAbruptUpstreamEndIsNeverTidy(t *testing.T) {
	p := startPair(t, "cut-after-3", nil, nil)
	r := streamChat(t, p.URL, "m")
	if r.status != 200 || r.text != strings.Join(p.wallA.Tokens[:3], "") || len(r.errors) != 1 || r.errors[0] != "upstream_error" || r.done != 0 {
		t.Fatalf("client %+v", r)
	}
	// And a following request still succeeds.
	resp := post(t, p.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
