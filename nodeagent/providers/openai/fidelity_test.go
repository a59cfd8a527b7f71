package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/iopgw/iop/execution"
)

// recordUpstream answers with body and records what it was sent.
func recordUpstream(t *testing.T, ct, body string) (*Provider, *map[string]any, *http.Header) {
	t.Helper()
	got, hdr := map[string]any{}, http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("upstream body %q: %v", b, err)
		}
		for k, v := range r.Header {
			hdr[k] = v
		}
		w.Header().Set("Content-Type", ct)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return New(Config{BaseURL: srv.URL + "/v1"}), &got, &hdr
}

func execute(t *testing.T, p *Provider, req *execution.RunRequest) ([]execution.RunEvent, error) {
	var evs []execution.RunEvent
	err := p.Execute(context.Background(), req, execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) }))
	return evs, err
}

// TestNormalizedRequestPassesUnknownFields: the client's chat body goes
// upstream with only model and streaming fields set.
func TestNormalizedRequestPassesUnknownFields(t *testing.T) {
	p, got, hdr := recordUpstream(t, "text/event-stream", "data: [DONE]\n\n")
	client := `{"model":"alias","messages":[{"role":"system","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA==","detail":"low"}}]}],` +
		`"reasoning_effort":"low","max_completion_tokens":5,"logit_bias":{"42":-100},"top_k":3,"chat_template_kwargs":{"enable_thinking":false},"metadata":{"k":"v"},"stream_options":{"include_obfuscation":false}}`
	_, err := execute(t, p, &execution.RunRequest{Model: "served-name", ChatBody: []byte(client),
		Header: map[string][]string{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "Authorization": {"Bearer client"}}})
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	_ = json.Unmarshal([]byte(client), &want)
	want["model"], want["stream"] = "served-name", true
	want["stream_options"] = map[string]any{"include_obfuscation": false, "include_usage": true}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("upstream body (-want +got):\n%s", diff)
	}
	if hdr.Get("Traceparent") == "" || hdr.Get("Authorization") != "" {
		t.Errorf("upstream headers %v", *hdr)
	}
}

// TestNormalizedAnswerIsFaithful: no usage reported means none invented;
// the upstream's id and fingerprint are kept; a surrogate pair split over
// two events is joined; an error event is typed by its class.
func TestNormalizedAnswerIsFaithful(t *testing.T) {
	stream := "data: {\"id\": \"chatcmpl-up\", \"created\": 1700000000, \"system_fingerprint\": \"fp_1\", \"choices\": [{\"index\": 0, \"delta\": {\"role\": \"assistant\", \"content\": \"a \\ud83d\"}, \"finish_reason\": null}]}\n\n" +
		"data: {\"id\": \"chatcmpl-up\", \"choices\": [{\"index\": 0, \"delta\": {\"content\": \"\\ude00 b\"}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n"
	p, _, _ := recordUpstream(t, "text/event-stream", stream)
	evs, err := execute(t, p, &execution.RunRequest{Model: "m", Stream: true, ChatBody: []byte(`{"model":"m","messages":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	var meta execution.RunEvent
	for _, ev := range evs {
		text += ev.Delta
		if ev.Type == execution.EventTypeStart && ev.ResponseID != "" {
			meta = ev
		}
	}
	last := evs[len(evs)-1]
	if text != "a \U0001F600 b" || last.Type != execution.EventTypeComplete || last.Usage != nil || meta.ResponseID != "chatcmpl-up" ||
		meta.Created != 1700000000 || meta.SystemFingerprint != "fp_1" {
		t.Fatalf("text %q, terminal %+v, meta %+v", text, last, meta)
	}

	p, _, _ = recordUpstream(t, "text/event-stream", "data: {\"error\": {\"message\": \"bad\", \"type\": \"invalid_request_error\", \"param\": \"messages\", \"code\": null}}\n\n")
	_, err = execute(t, p, &execution.RunRequest{Model: "m", ChatBody: []byte(`{"model":"m","messages":[]}`)})
	var f *execution.ExecutionFailure
	if !asFailure(err, &f) || f.Upstream == nil || f.Upstream.Status != 400 || f.Upstream.Type != "invalid_request_error" || f.Upstream.Param != "messages" {
		t.Fatalf("error event: %v", err)
	}
}

// TestNormalizedNonStreamJSON: with NonStream json the upstream gets the
// client's non-stream request and its own usage comes back.
func TestNormalizedNonStreamJSON(t *testing.T) {
	answer := `{"id":"chatcmpl-9","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":17,"completion_tokens":23,"total_tokens":40}}`
	p, got, _ := recordUpstream(t, "application/json", answer)
	p.cfg.NonStream = NonStreamJSON
	evs, err := execute(t, p, &execution.RunRequest{Model: "m", ChatBody: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if (*got)["stream"] != false || (*got)["stream_options"] != nil || last.Usage == nil || last.Usage.TotalTokens != 40 || evs[1].ResponseID != "chatcmpl-9" {
		t.Fatalf("upstream %v, events %+v", *got, evs)
	}
}

func asFailure(err error, f **execution.ExecutionFailure) bool {
	ef, ok := err.(*execution.ExecutionFailure)
	*f = ef
	return ok
}
