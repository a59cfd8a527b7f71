package e2e

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"

	"github.com/iopgw/iop/internal/testing/logbuf"
)

// TestAccessLog: one structured line per API request, with the request
// and key ids, models asked and answered, provider, status, outcome,
// attempts, time to first byte and usage — and no prompt, answer, key or
// upstream address.
func TestAccessLog(t *testing.T) {
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-secret-key")}}
	}, Nodes: []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", nodeagent.SimConfig{})}}}}, nil)
	send := func(key, model string) int {
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"sentinel-prompt-text"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.StatusCode
	}
	if code := send("sk-secret-key", "iop-sim"); code != 200 {
		t.Fatalf("status %d", code)
	}
	if code := send("sk-wrong", "iop-sim"); code != 401 {
		t.Fatalf("status %d", code)
	}
	recs := logs.Records("request")
	if len(recs) != 2 {
		t.Fatalf("%d access log lines, want 2: %s", len(recs), logs.String())
	}
	ok, denied := recs[0], recs[1]
	for k, want := range map[string]any{"key_id": "team-a", "route": "/v1/chat/completions", "status": 200.0, "outcome": "ok",
		"model": "iop-sim", "model_answered": "iop-sim", "provider": "node-a/sim-a", "attempts": 1.0, "fallbacks": 0.0} {
		if ok[k] != want {
			t.Errorf("%s = %v, want %v (%v)", k, ok[k], want, ok)
		}
	}
	if id, _ := ok["request_id"].(string); !strings.HasPrefix(id, "req_") || ok["total_tokens"] == nil || ok["ttfb_ms"] == nil {
		t.Errorf("access line %v", ok)
	}
	if denied["status"] != 401.0 || denied["key_id"] != "" {
		t.Errorf("denied line %v", denied)
	}
	all := logs.String()
	for _, secret := range []string{"sentinel-prompt-text", "sk-secret-key", "sk-wrong", "You said", c.WallURL} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// TestAccessLogNamesEveryAnswer (issue 30): a refused request still logs
// its request id and the model asked — by name when the edge knows it,
// as "unknown" when the caller made it up (such a name never reaches a
// log: TestSentinelsNeverLeak) — and every line's id is its own.
func TestAccessLogNamesEveryAnswer(t *testing.T) {
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Models: []string{"iop-sim"}}}
	}, Nodes: []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", nodeagent.SimConfig{}), Sim("sim-b", nodeagent.SimConfig{})}}}}, nil)
	send := func(model string) int {
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.StatusCode
	}
	if code := send("no-such-model"); code != http.StatusNotFound {
		t.Fatalf("unknown model: %d", code)
	}
	recs := logs.Records("request")
	if len(recs) != 1 || recs[0]["model"] != "unknown" || !strings.HasPrefix(recs[0]["request_id"].(string), "req_") {
		t.Fatalf("the 404's access line: %v", recs)
	}
	if code := send("iop-sim"); code != 200 {
		t.Fatalf("allowed model: %d", code)
	}
	recs = logs.Records("request")
	if len(recs) != 2 || recs[1]["request_id"] == recs[0]["request_id"] || recs[1]["model"] != "iop-sim" {
		t.Fatalf("access lines %v", recs)
	}
}

// TestModelListsFollowTheKey (issue 30): /v1/models, /v1/models/{id} and
// /api/tags list, per key, only what that key may use.
func TestModelListsFollowTheKey(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "narrow", SHA256: gateway.HashToken("sk-narrow"), Models: []string{"iop-sim"}},
			{ID: "wide", SHA256: gateway.HashToken("sk-wide")}}
	}}, func(c *Cluster) []NodeSpec {
		other := Sim("other", nodeagent.SimConfig{})
		other.Models = []string{"other-model"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{}), other}}}
	})
	get := func(key, path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, c.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	for _, path := range []string{"/v1/models", "/api/tags"} {
		if _, b := get("sk-narrow", path); !strings.Contains(b, "iop-sim") || strings.Contains(b, "other-model") {
			t.Errorf("%s for the narrow key: %s", path, b)
		}
		if _, b := get("sk-wide", path); !strings.Contains(b, "iop-sim") || !strings.Contains(b, "other-model") {
			t.Errorf("%s for the wide key: %s", path, b)
		}
	}
	if code, _ := get("sk-narrow", "/v1/models/other-model"); code != http.StatusNotFound {
		t.Errorf("a model the key may not use, by id: %d", code)
	}
}
