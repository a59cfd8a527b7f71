package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// TestAnthropicModelPages: the model list as an Anthropic client asks for
// it (anthropic-version sent) is Anthropic's page: cursors are names, the
// page after after_id or before before_id (a name no longer served still
// places the page), limit from 1 to 1,000, a key's allowlist applies, a
// lifecycle filter without "active" lists nothing; bad parameters are
// 400 invalid_request_error in Anthropic's shape. An OpenAI client's list
// is OpenAI's, as before.
func TestAnthropicModelPages(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "all", SHA256: gateway.HashToken("sk-all")},
			{ID: "few", SHA256: gateway.HashToken("sk-few"), Models: []string{"m-b", "m-d"}}}
	}}, func(*Cluster) []NodeSpec {
		p := Sim("sim", nodeagent.SimConfig{})
		p.Models = []string{"m-d", "m-a", "m-c", "m-b"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{p}}}
	})
	type page struct {
		Data []struct {
			Type, ID, Lifecycle string
			CreatedAt           string `json:"created_at"`
		}
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}
	get := func(query, key string, anthropic bool) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, c.URL+"/v1/models"+query, nil)
		req.Header.Set("x-api-key", key)
		if anthropic {
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		query, key, ids string
		more            bool
	}{
		{"", "sk-all", "m-a,m-b,m-c,m-d", false},
		{"?limit=2", "sk-all", "m-a,m-b", true},
		{"?limit=2&after_id=m-b", "sk-all", "m-c,m-d", false},
		{"?limit=2&after_id=m-bb", "sk-all", "m-c,m-d", false},
		{"?limit=2&before_id=m-d", "sk-all", "m-b,m-c", true},
		{"?limit=2&before_id=m-b", "sk-all", "m-a", false},
		{"?after_id=m-d", "sk-all", "", false},
		{"?lifecycle[]=deprecated&lifecycle[]=retired", "sk-all", "", false},
		{"?lifecycle=active,deprecated", "sk-all", "m-a,m-b,m-c,m-d", false},
		{"", "sk-few", "m-b,m-d", false},
	} {
		status, body := get(tc.query, tc.key, true)
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil || status != 200 {
			t.Fatalf("%s: %d %s", tc.query, status, body)
		}
		var ids []string
		for _, m := range p.Data {
			if m.Type != "model" || m.CreatedAt != "1970-01-01T00:00:00Z" || m.Lifecycle != "active" {
				t.Fatalf("%s: not a ModelInfo: %s", tc.query, body)
			}
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != tc.ids || p.HasMore != tc.more {
			t.Errorf("%s (%s): %s, want %s (has_more %v)", tc.query, tc.key, body, tc.ids, tc.more)
		}
		if len(ids) > 0 && (p.FirstID == nil || *p.FirstID != ids[0] || p.LastID == nil || *p.LastID != ids[len(ids)-1]) ||
			len(ids) == 0 && (p.FirstID != nil || p.LastID != nil) {
			t.Errorf("%s: first and last ids of %s", tc.query, body)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after_id=m-a&before_id=m-c"} {
		if status, body := get(q, "sk-all", true); status != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}
	if status, body := get("/m-c", "sk-few", true); status != 404 || !strings.Contains(body, `"not_found_error"`) {
		t.Errorf("a model the key may not use: %d %s", status, body)
	}
	if status, body := get("", "sk-all", false); status != 200 || !strings.Contains(body, `"object":"list"`) || !strings.Contains(body, `"owned_by":"iop"`) {
		t.Errorf("an OpenAI client's list: %d %s", status, body)
	}
	if status, body := get("/nope", "sk-all", false); status != 404 || !strings.Contains(body, `"model_not_found"`) {
		t.Errorf("an OpenAI client's unknown model: %d %s", status, body)
	}
}
