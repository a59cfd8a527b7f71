package surface

import (
	"encoding/json"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/wire"
)

var lim = openai.Limits{MaxDepth: 64, MaxMessages: 1000}

// TestEveryWireSurfaceHasARoute: a surface a provider can declare is one
// a client can reach, and every route names a declarable surface.
func TestEveryWireSurfaceHasARoute(t *testing.T) {
	seen := map[string]bool{}
	paths := map[string]bool{}
	for _, s := range All {
		if !slices.Contains(wire.Surfaces, s.Serves) {
			t.Errorf("%s serves %q, not a wire surface", s, s.Serves)
		}
		if paths[s.Path] {
			t.Errorf("two surfaces route %s", s.Path)
		}
		paths[s.Path], seen[s.Serves] = true, true
		if ForPath(s.Path) != s {
			t.Errorf("ForPath(%s) is not %s", s.Path, s)
		}
		if s.Native != (s.Serves == wire.SurfaceOllama) {
			t.Errorf("%s: native form %v for wire surface %s", s, s.Native, s.Serves)
		}
		if !s.Native && s.Serves != wire.SurfaceOfPath(s.Path) {
			t.Errorf("%s: the tunnel names %s's surface %q", s, s.Path, wire.SurfaceOfPath(s.Path))
		}
	}
	for _, w := range wire.Surfaces {
		if !seen[w] {
			t.Errorf("wire surface %q has no route", w)
		}
	}
}

// TestDecode: each surface reads the model and stream flag of a minimal
// request, and refuses one without a model (but moderations, whose API
// names a default).
func TestDecode(t *testing.T) {
	bodies := map[*Surface]string{
		Chat:             `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		Responses:        `{"model":"m","stream":true,"input":"hi"}`,
		InputTokens:      `{"model":"m","input":"hi"}`,
		Completions:      `{"model":"m","stream":true,"prompt":"hi"}`,
		Embeddings:       `{"model":"m","input":"hi"}`,
		Moderations:      `{"model":"m","input":"hi"}`,
		Images:           `{"model":"m","prompt":"a cat"}`,
		Rerank:           `{"model":"m","query":"q","documents":["a"]}`,
		Speech:           `{"model":"m","input":"hi","voice":"alloy"}`,
		Messages:         `{"model":"m","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
		CountTokens:      `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		OllamaChat:       `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		OllamaGenerate:   `{"model":"m","prompt":"hi"}`,
		OllamaEmbed:      `{"model":"m","input":["a","b"]}`,
		OllamaEmbeddings: `{"model":"m","prompt":"a"}`,
	}
	for _, s := range All {
		if s.form != nil {
			continue // TestDecodeForm
		}
		body, ok := bodies[s]
		if !ok {
			t.Fatalf("no request for %s", s)
		}
		c, e := s.Decode([]byte(body), "application/json", lim)
		if e != nil {
			t.Fatalf("%s: %v", s, e)
		}
		if c.Model != "m" {
			t.Errorf("%s: model %q", s, c.Model)
		}
		wantStream := strings.Contains(body, `"stream":true`) || s == OllamaChat || s == OllamaGenerate // Ollama streams by default
		if c.Stream != wantStream {
			t.Errorf("%s: stream %v, want %v", s, c.Stream, wantStream)
		}
		if translated := s.encode != nil; (c.Run != nil) != translated {
			t.Errorf("%s: normalized run %v for a surface with an encoder %v", s, c.Run != nil, translated)
		}
		if s.TunnelOnly && s.encode != nil {
			t.Errorf("%s: tunnel-only with an encoder", s)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		delete(m, "model")
		nb, _ := json.Marshal(m)
		if s == Moderations {
			continue // TestModerationsDefaultModel
		}
		if _, e := s.Decode(nb, "application/json", lim); e == nil || e.Status != http.StatusBadRequest {
			t.Errorf("%s: a request without a model was not refused with 400: %v", s, e)
		}
	}
	if c, _ := Messages.Decode([]byte(bodies[Messages]), "application/json", lim); c.OutputLimit != 9 {
		t.Errorf("messages: output limit %d, want 9", c.OutputLimit)
	}
	if c, _ := OllamaEmbed.Decode([]byte(bodies[OllamaEmbed]), "application/json", lim); c.TunnelPath != "/v1/embeddings" || !strings.Contains(string(c.TunnelBody), `"input":["a","b"]`) {
		t.Errorf("ollama embed tunnels as %s %s", c.TunnelPath, c.TunnelBody)
	}
	if c, _ := Responses.Decode([]byte(`{"model":"m","input":"hi","previous_response_id":"resp_1"}`), "application/json", lim); c.Untranslated == nil || c.Run != nil {
		t.Error("a Responses request with upstream state was given a translated form")
	}
	if c, _ := Chat.Decode([]byte(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`), "application/json", lim); c.Run != nil {
		t.Error("a Chat request with n > 1 was given a translated form")
	}
}

// TestShapes: errors render in each API's own shape, found by path for
// routes that are no surface too.
func TestShapes(t *testing.T) {
	e := &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "model_not_found", Message: "no such model"}
	cases := []struct {
		path, want string
	}{
		{"/v1/chat/completions", `{"error":{"message":"no such model","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{"/v1/unknown", `{"error":{"message":"no such model","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{"/api/chat", `{"error":"no such model"}`},
		{"/api/unknown", `{"error":"no such model"}`},
		{"/v1/messages", `{"type":"error","error":{"type":"not_found_error","message":"no such model"}}`},
		{"/v1/messages/batches", `{"type":"error","error":{"type":"not_found_error","message":"no such model"}}`},
	}
	for _, tc := range cases {
		_, body := ShapeOfPath(tc.path).Render(e)
		if string(body) != tc.want {
			t.Errorf("%s: %s, want %s", tc.path, body, tc.want)
		}
	}
	if got := ShapeOllama.ModelNotFound("llama3", e).Message; got != "model 'llama3' not found" {
		t.Errorf("Ollama's model-not-found says %q", got)
	}
	if nf := Rerank.NotServed("m"); nf.Status != http.StatusNotFound || !strings.Contains(nf.Message, "/v1/rerank") || !strings.Contains(nf.Message, "rerank surface") {
		t.Errorf("not served: %+v", nf)
	}
}

// TestDecodeForm: a multipart surface finds its model (and stream flag)
// among the form fields, past a file part, and refuses a body that is
// not multipart, or names no model, in OpenAI's shape.
func TestDecodeForm(t *testing.T) {
	var b strings.Builder
	w := multipart.NewWriter(&b)
	f, _ := w.CreateFormFile("file", "a.wav")
	_, _ = f.Write(make([]byte, 4096))
	_ = w.WriteField("model", "whisper-1")
	_ = w.WriteField("stream", "true")
	_ = w.Close()
	for _, s := range []*Surface{Transcriptions, Translations, ImageEdits} {
		c, e := s.Decode([]byte(b.String()), w.FormDataContentType(), lim)
		if e != nil || c.Model != "whisper-1" || !c.Stream || c.Run != nil {
			t.Fatalf("%s: %+v %v", s, c, e)
		}
		if _, e := s.Decode([]byte(`{"model":"m"}`), "application/json", lim); e == nil || e.Status != http.StatusBadRequest {
			t.Errorf("%s took a JSON body: %v", s, e)
		}
	}
	var nb strings.Builder
	w = multipart.NewWriter(&nb)
	_ = w.WriteField("prompt", "x")
	_ = w.Close()
	if _, e := ImageEdits.Decode([]byte(nb.String()), w.FormDataContentType(), lim); e == nil || e.Param != "model" {
		t.Errorf("a form without a model: %v", e)
	}
}

// TestCheckedCallsPassTheCheck: a call says its body was checked only when
// jsonstrict's check accepts the body (the edge then reads it without
// checking again), and every JSON surface but Ollama's embeddings (plain
// encoding/json) checks it.
func TestCheckedCallsPassTheCheck(t *testing.T) {
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt":"p","input":"i","max_tokens":5}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"prompt":"p","input":"i","max_tokens":5,"model":"n"}`, // a duplicate key
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}],\"prompt\":\"\xff\",\"input\":\"\xff\",\"max_tokens\":5}",
	}
	for _, s := range All {
		if s.form != nil {
			continue
		}
		checked := false
		for _, b := range bodies {
			c, e := s.Decode([]byte(b), "application/json", lim)
			if e != nil || !c.Checked {
				continue
			}
			checked = true
			if err := jsonstrict.Check([]byte(b), lim.MaxDepth); err != nil {
				t.Errorf("%s: a call says %q was checked, and the check refuses it: %v", s, b, err)
			}
		}
		if want := s != OllamaEmbed && s != OllamaEmbeddings; checked != want {
			t.Errorf("%s: a valid body's call says checked %v, want %v", s, checked, want)
		}
	}
}

// TestModerationsDefaultModel: a moderation without a model is routed to
// the API's default, omni-moderation-latest, and the body sent upstream
// names it, every other byte as the client sent it; an empty model, or
// a model that is not a string, is still refused.
func TestModerationsDefaultModel(t *testing.T) {
	for body, want := range map[string]string{
		`{"input":"hi"}`:                 `{"model":"omni-moderation-latest","input":"hi"}`,
		`{ "input" : ["a", "b"] }`:       `{"model":"omni-moderation-latest", "input" : ["a", "b"] }`,
		`{"input":"hi","model":"mod-7"}`: "",
	} {
		c, e := Moderations.Decode([]byte(body), "application/json", lim)
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		if want == "" {
			if c.Model != "mod-7" || c.TunnelBody != nil {
				t.Errorf("%s: model %q, tunnel body %s; want the client's model and body", body, c.Model, c.TunnelBody)
			}
			continue
		}
		if c.Model != "omni-moderation-latest" || string(c.TunnelBody) != want || c.TunnelPath != "" {
			t.Errorf("%s: model %q, tunnel %q %s; want omni-moderation-latest and %s", body, c.Model, c.TunnelPath, c.TunnelBody, want)
		}
	}
	for _, body := range []string{`{"model":"","input":"hi"}`, `{"model":7,"input":"hi"}`, `{"model":null,"input":"hi"}`} {
		if _, e := Moderations.Decode([]byte(body), "application/json", lim); e == nil || e.Status != http.StatusBadRequest {
			t.Errorf("%s: not refused with 400: %v", body, e)
		}
	}
	if _, e := Images.Decode([]byte(`{"prompt":"a cat"}`), "application/json", lim); e == nil || e.Param != "model" {
		t.Errorf("an image request without a model (whose default depends on its parameters) was not refused: %v", e)
	}
}

// TestInputTokensDecode: a Responses token count is checked as a Responses
// request, its input optional; it names the previous response it
// continues (for the pin), and it is a count: nothing charged.
func TestInputTokensDecode(t *testing.T) {
	c, e := InputTokens.Decode([]byte(`{"model":"m","instructions":"be brief","previous_response_id":"resp_1"}`), "application/json", lim)
	if e != nil || c.Echo.PreviousResponseID != "resp_1" || c.Stream {
		t.Fatalf("%+v %v", c, e)
	}
	if !InputTokens.Counts || !CountTokens.Counts || Responses.Counts || Messages.Counts {
		t.Error("only the token counts are counts")
	}
	for body, param := range map[string]string{
		`{"model":"m","input":7}`:                    "input",
		`{"model":"m","input":"hi","temperature":9}`: "temperature",
		`{"model":"m","max_output_tokens":0}`:        "max_output_tokens",
	} {
		if _, e := InputTokens.Decode([]byte(body), "application/json", lim); e == nil || e.Status != http.StatusBadRequest || e.Param != param {
			t.Errorf("%s: %+v, want a 400 naming %s", body, e, param)
		}
	}
}
