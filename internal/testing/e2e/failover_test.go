package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

// failoverRig is a cluster with model "primary" (fallback "backup"), each
// on its own provider and wall; the primary's wall misbehaves on demand.
type failoverRig struct {
	*Cluster
	primary, backup *wall.Wall
}

// fastRetry shortens the policy's waits for real-time tests, unless
// IOP_FAILOVER_DEFAULTS=1 asks for the shipped defaults (the closing
// note's table).
func fastRetry(g *gateway.Config) {
	if os.Getenv("IOP_FAILOVER_DEFAULTS") == "1" {
		return
	}
	base, maxWait := 20*time.Millisecond, 80*time.Millisecond
	g.Retry.BackoffBase, g.Retry.BackoffMax = &base, &maxWait
}

func startFailover(t *testing.T, fault string, gw func(*gateway.Config)) *failoverRig {
	r := &failoverRig{}
	r.Cluster = Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "primary", Fallbacks: []string{"backup"}}}
		fastRetry(g)
		if gw != nil {
			gw(g)
		}
	}}, func(c *Cluster) []NodeSpec {
		var urlP, urlB string
		r.primary, urlP = c.AddWall(t, fault)
		r.backup, urlB = c.AddWall(t, "")
		p := nodeagent.ProviderConfig{ID: "p", Adapter: "openai", BaseURL: urlP + "/v1", Models: []string{"primary"}, Capacity: 8, ResponseStallTimeoutMS: 400}
		b := nodeagent.ProviderConfig{ID: "b", Adapter: "openai", BaseURL: urlB + "/v1", Models: []string{"backup"}, Capacity: 8}
		return []NodeSpec{
			{ID: "node-p", Providers: []nodeagent.ProviderConfig{p}, Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = 100 * time.Millisecond }},
			{ID: "node-b", Providers: []nodeagent.ProviderConfig{b}},
		}
	})
	return r
}

// clientResult is what a client saw: status, assistant text, the error
// code (from an error body or an in-band error event), whether the stream
// ended with its own terminal.
type clientResult struct {
	status int
	text   string
	code   string
	done   bool
	took   time.Duration
}

func (r clientResult) String() string {
	end := "no [DONE]"
	if r.done {
		end = "[DONE]"
	}
	return fmt.Sprintf("%d %q code=%q %s in %v", r.status, r.text, r.code, end, r.took.Round(10*time.Millisecond))
}

// curlStream posts a streaming chat request as curl would and reads it all.
func curlStream(t *testing.T, url, model string) clientResult {
	t.Helper()
	start := time.Now()
	resp := post(t, url+"/v1/chat/completions", `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := clientResult{status: resp.StatusCode, took: time.Since(start)}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error struct{ Code string } }
		_ = json.Unmarshal(b, &e)
		r.code = e.Error.Code
		return r
	}
	for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			r.done = true
			continue
		}
		var c struct {
			Error   *struct{ Code string } `json:"error"`
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Error != nil {
			r.code = c.Error.Code
		}
		for _, ch := range c.Choices {
			r.text += ch.Delta.Content
		}
	}
	return r
}

// sdkStream streams with openai-go (its own retries off, so attempts are
// iop's).
func sdkStream(t *testing.T, url, model string) clientResult {
	t.Helper()
	start := time.Now()
	client := oai.NewClient(option.WithBaseURL(url+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Model: model,
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
	r := clientResult{status: http.StatusOK}
	for s.Next() {
		for _, ch := range s.Current().Choices {
			r.text += ch.Delta.Content
		}
	}
	if err := s.Err(); err != nil {
		var ae *oai.Error
		if errors.As(err, &ae) {
			r.status, r.code = ae.StatusCode, ae.Code
		} else {
			// An in-band error event: the SDK reports its JSON.
			var e struct{ Code string }
			_, js, _ := strings.Cut(err.Error(), "streaming: ")
			if json.Unmarshal([]byte(js), &e) != nil || e.Code == "" {
				e.Code = "stream_error: " + err.Error()
			}
			r.code = e.Code
		}
	} else {
		r.done = true
	}
	r.took = time.Since(start)
	return r
}

// TestFailoverScenarios is issue 14's table through real HTTP: the
// primary's upstream misbehaves, the fallback is healthy; for each fault
// the attempts each upstream saw, what curl and openai-go received, and
// no hang, no truncated success, no duplicated byte.
func TestFailoverScenarios(t *testing.T) {
	ftt := func(g *gateway.Config) {
		d := 100 * time.Millisecond
		g.Retry.FirstTokenTimeout = &d
	}
	full := "Hello world from the wall."
	tests := []struct {
		fault       string
		gw          func(*gateway.Config)
		primary     int    // attempts the primary's upstream saw
		backup      int    // attempts the fallback's upstream saw
		status      int    // what the client got
		code        string // its error code, if any
		text        string // its text (a prefix, for committed failures)
		done        bool
		description string
	}{
		{fault: "429-retry-after", primary: 3, backup: 1, status: 200, text: full, done: true, description: "429 with Retry-After: 2 retries, then the fallback"},
		{fault: "429-bare", primary: 3, backup: 1, status: 200, text: full, done: true, description: "429 without Retry-After"},
		{fault: "500-once", primary: 2, backup: 0, status: 200, text: full, done: true, description: "500 once: the retry answers"},
		{fault: "503-persist", primary: 3, backup: 1, status: 200, text: full, done: true, description: "503 always"},
		{fault: "reset-before-headers", primary: 3, backup: 1, status: 200, text: full, done: true, description: "reset before headers (connect)"},
		{fault: "accept-silent", primary: 1, backup: 1, status: 200, text: full, done: true, description: "accept, then silence: stall → fallback"},
		{fault: "slow-ttft-300ms", primary: 1, backup: 0, status: 200, text: full, done: true, description: "slow first token, no limit"},
		{fault: "slow-ttft-300ms", gw: ftt, primary: 1, backup: 1, status: 200, text: full, done: true, description: "slow first token, 100ms first-token timeout"},
		{fault: "cut-after-3", primary: 1, backup: 0, status: 200, code: "upstream_error", text: "Hello world from", description: "cut after 3 tokens (committed)"},
		{fault: "stall-after-3", primary: 1, backup: 0, status: 200, code: "response_stalled", text: "Hello world from", description: "stall after 3 tokens (committed)"},
		{fault: "malformed-at-3", primary: 1, backup: 0, status: 200, text: "Hello world", description: "one malformed event (tunnelled as sent)"},
		{fault: "no-done", primary: 1, backup: 0, status: 200, text: full, description: "no [DONE] after finish_reason"},
		{fault: "ctx-length-400", primary: 1, backup: 1, status: 200, text: full, done: true, description: "400 context_length_exceeded → fallback"},
		{fault: "content-filter-400", primary: 1, backup: 0, status: 400, code: "content_policy_violation", description: "400 content policy: answered"},
	}
	for _, tt := range tests {
		for _, client := range []string{"curl", "openai-go"} {
			t.Run(tt.description+"/"+client, func(t *testing.T) {
				r := startFailover(t, tt.fault, tt.gw)
				var got clientResult
				if client == "curl" {
					got = curlStream(t, r.URL, "primary")
				} else {
					got = sdkStream(t, r.URL, "primary")
				}
				p, b := len(r.primary.Attempts()), len(r.backup.Attempts())
				t.Logf("| %s | %s | primary %d, fallback %d | %v |", tt.description, client, p, b, got)
				if p != tt.primary || b != tt.backup {
					t.Errorf("attempts: primary %d, fallback %d; want %d, %d", p, b, tt.primary, tt.backup)
				}
				if got.status != tt.status || (tt.code != "" && got.code != tt.code) || !strings.HasPrefix(got.text, tt.text) {
					t.Errorf("client got %v; want %d %q prefix %q", got, tt.status, tt.code, tt.text)
				}
				if tt.done && (!got.done || got.text != full) {
					t.Errorf("client got %v; want the whole answer once, ended", got)
				}
				if got.code != "" && got.done && client == "curl" {
					t.Errorf("an error and [DONE] in one stream: %v", got)
				}
				r.WaitIdle(t)
			})
		}
	}
}

// TestFailoverTwoPrimaries: both providers of the primary answer 503; each
// is tried (a set, never cycling), then the fallback answers.
func TestFailoverTwoPrimaries(t *testing.T) {
	var p1, p2, fb *wall.Wall
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "primary", Fallbacks: []string{"backup"}}}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		var u1, u2, ub string
		p1, u1 = c.AddWall(t, "503-persist")
		p2, u2 = c.AddWall(t, "503-persist")
		fb, ub = c.AddWall(t, "")
		mk := func(id, url, model string) nodeagent.ProviderConfig {
			return nodeagent.ProviderConfig{ID: id, Adapter: "openai", BaseURL: url + "/v1", Models: []string{model}, Capacity: 8}
		}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{mk("p1", u1, "primary"), mk("p2", u2, "primary"), mk("b", ub, "backup")}}}
	})
	got := curlStream(t, c.URL, "primary")
	if got.status != 200 || !got.done || got.text != "Hello world from the wall." {
		t.Fatalf("client got %v", got)
	}
	if a, b, f := len(p1.Attempts()), len(p2.Attempts()), len(fb.Attempts()); a+b != 3 || a == 0 || b == 0 || f != 1 {
		t.Fatalf("attempts p1 %d, p2 %d, fallback %d; want both primaries (3 in all), then the fallback once", a, b, f)
	}
}

// TestFailoverOneProviderForAll: one upstream serves both models (the
// model selects its behaviour): the primary's retries, then the fallback
// on the same provider.
func TestFailoverOneProviderForAll(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "503-persist", Fallbacks: []string{"ok"}}}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", "", "503-persist", "ok")}}}
	})
	got := sdkStream(t, c.URL, "503-persist")
	var models []string
	for _, a := range c.Wall.Attempts() {
		models = append(models, a.Model)
	}
	if got.status != 200 || got.text != "Hello world from the wall." || strings.Join(models, " ") != "503-persist 503-persist 503-persist ok" {
		t.Fatalf("client got %v; upstream saw %v", got, models)
	}
}

// TestPrimaryOutage: the primary refuses every connection for 2 s, then
// recovers. Every request meanwhile is answered (by the fallback once the
// primary is ejected); the primary serves again soon after it recovers
// (ejection scaled down: 500 ms base).
func TestPrimaryOutage(t *testing.T) {
	r := startFailover(t, "", func(g *gateway.Config) {
		g.Outlier.BaseEjectionTime, g.Outlier.MaxEjectionTime = 500*time.Millisecond, time.Second
	})
	r.primary.SetFault("reset-before-headers")
	recoverAt := time.Now().Add(2 * time.Second)
	var backAt time.Time
	for deadline := recoverAt.Add(4 * time.Second); time.Now().Before(deadline) && backAt.IsZero(); {
		if !recoverAt.IsZero() && time.Now().After(recoverAt) {
			r.primary.SetFault("")
		}
		before := len(r.primary.Attempts())
		got := curlStream(t, r.URL, "primary")
		if got.status != 200 || !got.done || got.text != "Hello world from the wall." {
			t.Fatalf("request during the outage got %v", got)
		}
		if time.Now().After(recoverAt) {
			for _, a := range r.primary.Attempts()[before:] {
				if a.Fault != "reset-before-headers" {
					backAt = time.Now()
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if backAt.IsZero() {
		t.Fatal("the primary never served again after it recovered")
	}
	if d := backAt.Sub(recoverAt); d > 1500*time.Millisecond {
		t.Fatalf("the primary served again %v after recovering; want within the ejection time", d)
	}
	t.Logf("primary back %v after recovering; fallback answered %d requests", backAt.Sub(recoverAt).Round(10*time.Millisecond), len(r.backup.Attempts()))
}

// TestResumeThroughTheEdge: resume on; the primary (sim) cuts its stream
// after 3 tokens; the fallback refuses prefill (a wall declared
// prefill-capable that answers 400), the next continues it (sim). The
// client reads the sim's whole answer exactly once, [DONE], no error.
func TestResumeThroughTheEdge(t *testing.T) {
	var refuser *wall.Wall
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		on := true
		g.Models = []gateway.ModelConfig{{Name: "primary", Fallbacks: []string{"refuses", "backup"}, Retry: gateway.RetryConfig{Resume: &on}}}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		var u string
		refuser, u = c.AddWall(t, "status-400")
		yes := true
		cut := Sim("p", nodeagent.SimConfig{CutAfter: 3, TokenLatency: time.Millisecond})
		cut.Models = []string{"primary"}
		cont := Sim("b", nodeagent.SimConfig{TokenLatency: time.Millisecond})
		cont.Models = []string{"backup"}
		ref := nodeagent.ProviderConfig{ID: "r", Adapter: "openai", BaseURL: u + "/v1", Models: []string{"refuses"}, Capacity: 8, Prefill: &yes}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{cut, ref, cont}}}
	})
	want := sdkStream(t, c.URL, "backup") // the sim's whole answer, uncut
	for _, client := range []string{"curl", "openai-go"} {
		before := len(refuser.Attempts())
		var got clientResult
		if client == "curl" {
			got = curlStream(t, c.URL, "primary")
		} else {
			got = sdkStream(t, c.URL, "primary")
		}
		if got.status != 200 || !got.done || got.code != "" || got.text != want.text {
			t.Fatalf("%s got %v; want %q once", client, got, want.text)
		}
		if n := len(refuser.Attempts()) - before; n != 1 {
			t.Fatalf("the refusing fallback saw %d continuation attempts", n)
		}
		if m := refuser.Attempts()[before].Body; !strings.Contains(string(m), `"role":"assistant"`) {
			t.Fatalf("the continuation carried no assistant prefix: %s", m)
		}
	}
	if v := c.Metric(t, "iop_edge_resumes_total", map[string]string{"outcome": "prefill"}); v < 2 {
		t.Fatalf("iop_edge_resumes_total{prefill} = %v", v)
	}
}

// TestSpliceThroughTheEdge (issue 29): a committed stream cut with no
// fallback that takes a prefill is regenerated on the fallback and spliced:
// the client reads the clean answer once (the sims are deterministic); a
// fallback whose answer differs ends the stream with resume_diverged and
// not one byte of the difference.
func TestSpliceThroughTheEdge(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		on := true
		g.Models = []gateway.ModelConfig{
			{Name: "primary", Fallbacks: []string{"backup"}, Retry: gateway.RetryConfig{Resume: &on}},
			{Name: "other", Fallbacks: []string{"ok"}, Retry: gateway.RetryConfig{Resume: &on}},
		}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		no := false
		cut := Sim("p", nodeagent.SimConfig{CutAfter: 3, TokenLatency: time.Millisecond})
		cut.Models = []string{"primary", "other"}
		same := Sim("b", nodeagent.SimConfig{TokenLatency: time.Millisecond})
		same.Models, same.Prefill = []string{"backup"}, &no
		differs := c.WallProvider("w", "openai", nodeagent.PathAuto, "ok")
		differs.Prefill = &no
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{cut, same, differs}}}
	})
	want := sdkStream(t, c.URL, "backup")
	for _, client := range []string{"curl", "openai-go"} {
		var got clientResult
		if client == "curl" {
			got = curlStream(t, c.URL, "primary")
		} else {
			got = sdkStream(t, c.URL, "primary")
		}
		if got.status != 200 || !got.done || got.code != "" || got.text != want.text {
			t.Fatalf("%s got %+v; want %q once", client, got, want.text)
		}
	}
	if v := c.Metric(t, "iop_edge_resumes_total", map[string]string{"outcome": "splice"}); v != 2 {
		t.Fatalf("iop_edge_resumes_total{splice} = %v", v)
	}
	got := curlStream(t, c.URL, "other")
	if got.code != "resume_diverged" || got.done || !strings.HasPrefix(want.text, got.text) || got.text == "" {
		t.Fatalf("a diverging splice: %+v (the cut sent a prefix of %q)", got, want.text)
	}
	if v := c.Metric(t, "iop_edge_resumes_total", map[string]string{"outcome": "diverged"}); v != 1 {
		t.Fatalf("iop_edge_resumes_total{diverged} = %v", v)
	}
}

// TestFailoverOllamaClient: an Ollama client's request moves to the
// model's fallback like any other surface's (its native body rebuilt for
// the fallback model), and the answer is Ollama's NDJSON.
func TestFailoverOllamaClient(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "503-persist", Fallbacks: []string{"ok"}}}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", "", "503-persist", "ok")}}}
	})
	resp, err := http.Post(c.URL+"/api/chat", "application/json", strings.NewReader(`{"model":"503-persist","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	done := false
	dec := json.NewDecoder(resp.Body)
	for {
		var line struct {
			Message struct{ Content string } `json:"message"`
			Done    bool                     `json:"done"`
		}
		if err := dec.Decode(&line); err != nil {
			break
		}
		text.WriteString(line.Message.Content)
		done = done || line.Done
	}
	var models []string
	for _, a := range c.Wall.Attempts() {
		models = append(models, a.Model)
	}
	if resp.StatusCode != 200 || !done || text.String() != "Hello world from the wall." || strings.Join(models, " ") != "503-persist 503-persist 503-persist ok" {
		t.Fatalf("client got %d %q done=%v; upstream saw %v", resp.StatusCode, text.String(), done, models)
	}
}
