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
