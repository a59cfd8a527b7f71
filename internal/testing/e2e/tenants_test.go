package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

func chatAs(t *testing.T, url, key string, stream bool) *http.Response {
	t.Helper()
	body := `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"iop-sim","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestKeyRequestLimit: a key limited to 20 requests a minute gets exactly
// 20 (the bucket refills one every 3 s), then 429 with OpenAI's rate-limit
// headers; openai-go (its default
// retries on) backs off by Retry-After and succeeds once a request is
// available again; another key is not affected.
func TestKeyRequestLimit(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{RequestsPerMinute: 20}},
			{ID: "team-b", SHA256: gateway.HashToken("sk-b")}}
	}, Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}}, nil)
	for i := range 20 {
		resp := chatAs(t, c.URL, "sk-a", i%2 == 0)
		readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i+1, resp.StatusCode)
		}
	}
	resp := chatAs(t, c.URL, "sk-a", false)
	body := readAll(t, resp)
	h := resp.Header
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"rate_limit_exceeded"`) || h.Get("Retry-After") == "" ||
		h.Get("X-Ratelimit-Limit-Requests") != "20" || h.Get("X-Ratelimit-Remaining-Requests") != "0" || h.Get("X-Ratelimit-Reset-Requests") == "" {
		t.Fatalf("the 21st request: %d %s %v", resp.StatusCode, body, h)
	}
	if r := chatAs(t, c.URL, "sk-b", false); readAll(t, r) == "" || r.StatusCode != 200 {
		t.Fatalf("another key: %d", r.StatusCode)
	}
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("sk-a")) // default retries
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: "iop-sim",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
	if err != nil || len(got.Choices) == 0 {
		t.Fatalf("openai-go did not get through after backing off: %v", err)
	}
	t.Logf("openai-go backed off and succeeded after %v", time.Since(start).Round(10*time.Millisecond))
	if v := c.Metric(t, "iop_edge_key_refusals_total", map[string]string{"key_id": "team-a", "code": "rate_limit_exceeded"}); v < 2 {
		t.Fatalf("refusals counted %v", v)
	}
}

// TestKeyTokenBudget: a daily token budget counted from the usage the sim
// reports, streaming or not; once used up, 429 insufficient_quota; the
// usage shows in /admin/keys and the key metrics.
func TestKeyTokenBudget(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{TokensPerDay: 30}}}
	}, Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}}, nil)
	answered := 0
	for i := range 5 {
		resp := chatAs(t, c.URL, "sk-a", i%2 == 1)
		body := readAll(t, resp)
		if resp.StatusCode == 200 {
			answered++
			continue
		}
		if resp.StatusCode != 429 || !strings.Contains(body, `"code":"insufficient_quota"`) {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	// Each sim answer is 13 tokens (1 prompt + 12 completion): 3 fit under
	// 30 (39 used: the budget is checked before a request, not cut inside it).
	if answered != 3 {
		t.Fatalf("%d answered under a 30-token budget, want 3", answered)
	}
	if v := c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "model": "iop-sim", "kind": "completion"}); v != 36 {
		t.Fatalf("completion tokens counted %v, want 36", v)
	}
	resp, err := http.Get(c.AdminURL + "/admin/keys")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if !strings.Contains(body, `"remaining_tokens_today": 0`) || !strings.Contains(body, `"tokens": 39`) || strings.Contains(body, "sk-a") {
		t.Fatalf("/admin/keys %s", body)
	}
}

// TestKeyRequestLimitOpenAINode: openai-node (default retries) makes 21
// requests on a key limited to 20 a minute: the 21st meets a 429, the
// client waits the Retry-After and gets its answer — every call succeeds.
func TestKeyRequestLimitOpenAINode(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{RequestsPerMinute: 20}}}
	}, Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}}, nil)
	cmd := exec.Command("node", "ratelimit.mjs", c.URL+"/v1", "sk-a", "21")
	cmd.Dir = filepath.Join("..", "..", "..", "conformance", "testdata", "js")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r struct{ OK, Calls, Status429 int }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r.OK != 21 || r.Status429 < 1 || r.Calls != 21+r.Status429 {
		t.Fatalf("openai-node: %+v", r)
	}
	t.Logf("openai-node: 21 answers, %d 429s retried", r.Status429)
}

// TestKeyUsageAcrossFailover: a request whose primary fails (503, no
// usage) and whose fallback answers counts the fallback's reported usage
// only — failed attempts report none, and iop never estimates.
func TestKeyUsageAcrossFailover(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{TokensPerDay: 1000}}}
		g.Models = []gateway.ModelConfig{{Name: "503-persist", Fallbacks: []string{"iop-sim"}}}
		fastRetry(g)
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", "", "503-persist"),
			Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}
	})
	req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"503-persist","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"total_tokens":13`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if v := c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "kind": "completion"}); v != 12 {
		t.Fatalf("completion tokens counted %v, want the fallback's 12", v)
	}
}

// TestKeyBudgetFromTunnelledUsage: on the tunnel path the usage the
// upstream reports (a wall: 9 prompt + 6 completion tokens, in the JSON
// answer and in a stream's usage chunk) counts toward the key's budget.
func TestKeyBudgetFromTunnelledUsage(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{TokensPerDay: 1000}}}
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", nodeagent.PathTunnel, "ok")}}}
	})
	for _, body := range []string{`{"model":"ok","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"ok","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`} {
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if p, cpl := c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "kind": "prompt"}),
		c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "kind": "completion"}); p != 18 || cpl != 12 {
		t.Fatalf("tokens counted: prompt %v, completion %v; want 18 and 12 from the wall's usage", p, cpl)
	}
}
