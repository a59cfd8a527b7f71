package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/nodeagent"
)

// TestOllamaEmbed (issue 30): Ollama's /api/embed and /api/embeddings go
// byte for byte to a native Ollama upstream, and to any other provider
// (the sim here) as OpenAI embeddings whose answer — and error — is
// reshaped into Ollama's.
func TestOllamaEmbed(t *testing.T) {
	native := `{"model":"emb","embeddings":[[0.25,-0.5]],"total_duration":1,"load_duration":0,"prompt_eval_count":1}`
	var saw []string
	ol := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/tags":
			_, _ = io.WriteString(w, `{"models":[{"name":"emb:latest","model":"emb:latest"}]}`)
		case "/api/embed":
			b, _ := io.ReadAll(r.Body)
			saw = append(saw, string(b))
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = io.WriteString(w, native)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ol.Close()
	c := Start(t, Options{}, func(*Cluster) []NodeSpec {
		o := nodeagent.ProviderConfig{ID: "ollama", Adapter: "ollama", BaseURL: ol.URL, Models: []string{"emb"}, Capacity: 4}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{o, Sim("sim", nodeagent.SimConfig{})}}}
	})
	post := func(path, body string) (int, string) {
		resp, err := http.Post(c.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	// Native: the upstream's bytes, and it got the client's body.
	req := `{"model":"emb","input":"hello","truncate":false}`
	if code, body := post("/api/embed", req); code != 200 || body != native || len(saw) != 1 || saw[0] != req {
		t.Fatalf("native: %d %s (upstream saw %v)", code, body, saw)
	}
	// Reshaped from the sim's OpenAI embeddings.
	code, body := post("/api/embed", `{"model":"iop-sim","input":["a","b c"],"dimensions":8}`)
	var got struct {
		Model           string      `json:"model"`
		Embeddings      [][]float64 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != 200 || got.Model != "iop-sim" || len(got.Embeddings) != 2 ||
		len(got.Embeddings[0]) != 8 || got.PromptEvalCount != 3 {
		t.Fatalf("reshaped /api/embed: %d %s", code, body)
	}
	code, body = post("/api/embeddings", `{"model":"iop-sim","prompt":"a"}`)
	var legacy struct{ Embedding []float64 }
	if err := json.Unmarshal([]byte(body), &legacy); err != nil || code != 200 || len(legacy.Embedding) != 64 {
		t.Fatalf("reshaped /api/embeddings: %d %s", code, body)
	}
	// An upstream error in Ollama's shape; bad input in Ollama's shape.
	if code, body := post("/api/embed", `{"model":"iop-sim","input":"x","dimensions":5000}`); code != 400 || !strings.HasPrefix(body, `{"error":"`) {
		t.Fatalf("an upstream error: %d %s", code, body)
	}
	// Nothing to embed is Ollama's load of the model: no embeddings,
	// answered by the edge, which sends it to no upstream.
	for path, bodies := range map[string][]string{
		"/api/embed":      {`{"model":"emb"}`, `{"model":"emb","input":""}`, `{"model":"emb","input":[]}`, `{"model":"iop-sim","input":""}`},
		"/api/embeddings": {`{"model":"emb"}`, `{"model":"emb","prompt":""}`},
	} {
		for _, b := range bodies {
			want := `{"embedding":[]}`
			if path == "/api/embed" {
				want = `{"model":"` + map[bool]string{true: "emb", false: "iop-sim"}[strings.Contains(b, `"emb"`)] + `","embeddings":[]}`
			}
			if code, body := post(path, b); code != 200 || body != want {
				t.Errorf("load %s %s: %d %s", path, b, code, body)
			}
		}
	}
	if len(saw) != 1 {
		t.Fatalf("the native upstream saw %d requests, want 1 (no loads)", len(saw))
	}
	if code, body := post("/api/embed", `{"model":"iop-sim","input":5}`); code != 400 || !strings.HasPrefix(body, `{"error":"`) {
		t.Fatalf("bad input: %d %s", code, body)
	}
	if code, body := post("/api/embed", `{"model":"nope","input":"x"}`); code != 404 || !strings.Contains(body, "not found") {
		t.Fatalf("unknown model: %d %s", code, body)
	}
}
