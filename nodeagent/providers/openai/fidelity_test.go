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
	"github.com/iopgw/iop/internal/testing/oaispec"
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

// chatSamples is a value for every field of OpenAI's
// CreateChatCompletionRequest schema (TestChatFieldsPassUnchanged checks
// the list is complete).
var chatSamples = map[string]string{
	"audio": `{"voice":"alloy","format":"wav"}`, "frequency_penalty": `0.5`, "function_call": `"auto"`,
	"functions": `[{"name":"f"}]`, "logit_bias": `{"42":-100}`, "logprobs": `true`, "max_completion_tokens": `9`, "max_tokens": `9`,
	"messages": `[{"role":"developer","content":[{"type":"text","text":"x"}]},{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}},{"type":"file","file":{"file_id":"f1"}}]}]`,
	"metadata": `{"k":"v"}`, "modalities": `["text","audio"]`, "model": `"client-model"`, "moderation": `{"x":1}`, "n": `1`,
	"parallel_tool_calls": `false`, "prediction": `{"type":"content","content":"x"}`, "presence_penalty": `0.1`,
	"prompt_cache_key": `"k"`, "prompt_cache_options": `{"x":1}`, "prompt_cache_retention": `"24h"`, "reasoning_effort": `"low"`,
	"response_format": `{"type":"json_schema","json_schema":{"name":"o","schema":{}}}`, "safety_identifier": `"s"`, "seed": `7`,
	"service_tier": `"flex"`, "stop": `["x"]`, "store": `true`, "stream": `false`, "stream_options": `{"include_obfuscation":false}`,
	"temperature": `0.2`, "tool_choice": `"required"`, "tools": `[{"type":"function","function":{"name":"f"}}]`, "top_logprobs": `2`,
	"top_p": `0.9`, "user": `"u"`, "verbosity": `"low"`, "web_search_options": `{}`,
	// common vendor extras
	"top_k": `40`, "min_p": `0.1`, "repetition_penalty": `1.1`, "chat_template_kwargs": `{"enable_thinking":false}`,
}

// TestChatFieldsPassUnchanged walks every field of OpenAI's Chat request
// schema: on the translated path to an OpenAI-compatible upstream each
// passes unchanged but model (the provider's name), stream and
// stream_options.include_usage.
func TestChatFieldsPassUnchanged(t *testing.T) {
	props, err := oaispec.Properties("CreateChatCompletionRequest")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range props {
		if _, ok := chatSamples[p]; !ok {
			t.Errorf("CreateChatCompletionRequest field %q has no sample: add one", p)
		}
	}
	body := map[string]json.RawMessage{}
	for k, v := range chatSamples {
		body[k] = json.RawMessage(v)
	}
	client, _ := json.Marshal(body)
	up, err := upstreamBody(&execution.RunRequest{Model: "served", ChatBody: client}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	_ = json.Unmarshal(up, &got)
	for k, v := range body {
		switch k {
		case "model":
			v = json.RawMessage(`"served"`)
		case "stream":
			v = json.RawMessage(`true`)
		case "stream_options":
			v = json.RawMessage(`{"include_obfuscation":false,"include_usage":true}`)
		}
		var want, have any
		_ = json.Unmarshal(v, &want)
		_ = json.Unmarshal(got[k], &have)
		if diff := cmp.Diff(want, have); diff != "" {
			t.Errorf("%s (-client +upstream):\n%s", k, diff)
		}
	}
	if len(got) != len(body) {
		t.Errorf("upstream body has %d fields, the client's %d", len(got), len(body))
	}
}
