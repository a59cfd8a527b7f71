package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/iopgw/iop/nodeagent"
)

// recorder is an OpenAI-compatible upstream that records what it was sent
// and answers with a fixed stream or JSON body.
type recorder struct {
	mu      sync.Mutex
	paths   []string
	bodies  [][]byte
	headers []http.Header
	stream  string // answer to stream requests
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	if req.Method == http.MethodGet {
		// The edge's connect probe (GET /models): not a request under test.
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	r.mu.Lock()
	r.paths, r.bodies, r.headers = append(r.paths, req.URL.Path), append(r.bodies, b), append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	var head struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(b, &head)
	if head.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, r.stream)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"x","object":"response","status":"completed","output":[],"model":"m"}`)
}

func (r *recorder) last() (string, []byte, http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.paths) - 1
	return r.paths[n], r.bodies[n], r.headers[n]
}

// postWith posts a JSON body with request headers.
func postWith(t *testing.T, url, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func postH(t *testing.T, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	resp := postWith(t, url, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDefaultPathIsPassthrough: with the default path (auto), a Chat
// request reaches an OpenAI-compatible upstream byte for byte, a Responses
// request is translated to Chat (losslessly, or refused naming the field),
// and a provider that declares responses gets it unchanged.
func TestDefaultPathIsPassthrough(t *testing.T) {
	ok := "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"hi\"}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n"
	chatOnly, both := &recorder{stream: ok}, &recorder{stream: ok}
	chatSrv, bothSrv := httptest.NewServer(chatOnly), httptest.NewServer(both)
	t.Cleanup(chatSrv.Close)
	t.Cleanup(bothSrv.Close)
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{
			{ID: "chat-only", Adapter: "openai", BaseURL: chatSrv.URL + "/v1", Models: []string{"m"}, APIKey: "sk-node",
				ForwardHeaders: []string{"OpenAI-Project"}},
			{ID: "native", Adapter: "openai", BaseURL: bothSrv.URL + "/v1", Models: []string{"r"}, Surfaces: []string{"chat", "responses"}},
		}}}
	})
	chat := `{"model":"m","stream":true,"messages":[{"role":"system","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":"hi"}],` +
		`"reasoning_effort":"low","max_completion_tokens":9,"logit_bias":{"1":2},"top_k":3,"metadata":{"a":"b"}}`
	hdr := map[string]string{"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "Authorization": "Bearer client-key",
		"OpenAI-Organization": "org-client", "OpenAI-Project": "proj-client", "Idempotency-Key": "k1"}
	if code, body := postH(t, c.URL+"/v1/chat/completions", chat, hdr); code != 200 || body != ok {
		t.Fatalf("chat: %d %q", code, body)
	}
	path, body, h := chatOnly.last()
	if path != "/v1/chat/completions" || !bytes.Equal(body, []byte(chat)) {
		t.Fatalf("upstream got %s %s, want the client's body byte for byte", path, body)
	}
	if h.Get("Authorization") != "Bearer sk-node" || h.Get("Openai-Organization") != "" || h.Get("Openai-Project") != "proj-client" ||
		h.Get("Traceparent") == "" || h.Get("Idempotency-Key") != "k1" {
		t.Fatalf("upstream headers %v", h)
	}

	// Responses on a chat-only upstream: translated.
	resp := `{"model":"m","input":"hi","max_output_tokens":5,"text":{"format":{"type":"json_schema","name":"o","schema":{"type":"object"}}},"stream":true}`
	if code, body := postH(t, c.URL+"/v1/responses", resp, hdr); code != 200 || !strings.Contains(body, "response.completed") {
		t.Fatalf("responses translated: %d %q", code, body)
	}
	path, body, h = chatOnly.last()
	var got map[string]any
	_ = json.Unmarshal(body, &got)
	rf, _ := json.Marshal(got["response_format"])
	if path != "/v1/chat/completions" || got["max_completion_tokens"] != 5.0 || string(rf) != `{"json_schema":{"name":"o","schema":{"type":"object"}},"type":"json_schema"}` ||
		h.Get("Traceparent") == "" || h.Get("Authorization") != "Bearer sk-node" {
		t.Fatalf("translated request %s %s %v", path, body, h)
	}
	if code, body := postH(t, c.URL+"/v1/responses", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, nil); code != 400 ||
		!strings.Contains(body, `"param":"previous_response_id"`) {
		t.Fatalf("previous_response_id on a chat-only provider: %d %s", code, body)
	}

	// Responses on a provider that serves it: unchanged, state included.
	native := `{"model":"r","input":"hi","previous_response_id":"resp_1","store":true}`
	if code, _ := postH(t, c.URL+"/v1/responses", native, nil); code != 200 {
		t.Fatalf("native responses: %d", code)
	}
	if path, body, _ := both.last(); path != "/v1/responses" || string(body) != native {
		t.Fatalf("native upstream got %s %s", path, body)
	}
}

// TestClientErrorEventsDoNotEject: an upstream that answers bad client
// requests with an error event inside a 200 stream is not ejected as an
// outlier, and the client gets the upstream's 400.
func TestClientErrorEventsDoNotEject(t *testing.T) {
	bad := &recorder{stream: "data: {\"error\": {\"message\": \"bad max_tokens\", \"type\": \"invalid_request_error\", \"param\": \"max_tokens\", \"code\": null}}\n\n"}
	srv := httptest.NewServer(bad)
	t.Cleanup(srv.Close)
	for _, path := range []string{nodeagent.PathAuto, nodeagent.PathNormalized} {
		t.Run(path, func(t *testing.T) {
			c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
				return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{{ID: "p", Adapter: "openai", Path: path, BaseURL: srv.URL + "/v1", Models: []string{"m"}}}}}
			})
			for range 8 {
				code, body := postH(t, c.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
				if code != 400 || !strings.Contains(body, `"type":"invalid_request_error"`) || !strings.Contains(body, `"param":"max_tokens"`) {
					t.Fatalf("%d %s", code, body)
				}
			}
			if n := c.Metric(t, "iop_edge_outlier_ejections_total", nil); n != 0 {
				t.Fatalf("%v ejections for client errors", n)
			}
		})
	}
}
