package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

// tunnel posts body to the sim's path and returns the answer's status
// and body.
func tunnel(t *testing.T, p *Provider, path, body string) (int, []byte) {
	t.Helper()
	return tunnelRequest(t, p, &execution.ProviderTunnelRequest{Method: http.MethodPost, Path: path, Body: []byte(body)})
}

// tunnelRequest sends req to the sim and returns the answer's status and
// body.
func tunnelRequest(t *testing.T, p *Provider, req *execution.ProviderTunnelRequest) (int, []byte) {
	t.Helper()
	var status int
	var out bytes.Buffer
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
		switch f.Type {
		case execution.FrameTypeResponseStart:
			status = f.Status
		case execution.FrameTypeBody:
			out.Write(f.Body)
		}
	})
	if err := p.Tunnel(t.Context(), req, em); err != nil {
		t.Fatal(err)
	}
	return status, out.Bytes()
}

// reply is what the tests read of a JSON answer or error.
type reply struct {
	Status  string
	Choices []json.RawMessage
	Error   struct{ Param, Code, Message string }
}

func decodeAnswer(t *testing.T, b []byte) reply {
	t.Helper()
	var v reply
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestTunnelChatChoices: the sim's Chat answers the one choice it makes,
// and refuses a request for more (n > 1) with a 400 naming n rather than
// answering with fewer choices than asked.
func TestTunnelChatChoices(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct {
		body    string
		status  int
		choices int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK, 1},
		{`{"model":"m","n":1,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK, 1},
		{`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, 0},
		{`{"model":"m","n":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, 0},
	} {
		status, body := tunnel(t, p, "/v1/chat/completions", tc.body)
		v := decodeAnswer(t, body)
		if status != tc.status || len(v.Choices) != tc.choices || (tc.status == http.StatusBadRequest && v.Error.Param != "n") {
			t.Errorf("%s: %d %s, want %d with %d choices", tc.body, status, body, tc.status, tc.choices)
		}
	}
}

// TestTunnelResponsesIsStateless: the sim stores no response, so a
// request continuing one gets OpenAI's own refusal of an unknown
// previous response (and a conversation a refusal naming it) instead of
// an answer made without the context it asked for.
func TestTunnelResponsesIsStateless(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct {
		body        string
		status      int
		param, code string
	}{
		{`{"model":"m","input":"hi"}`, http.StatusOK, "", ""},
		{`{"model":"m","input":"hi","previous_response_id":null,"conversation":null}`, http.StatusOK, "", ""},
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, http.StatusBadRequest, "previous_response_id", "previous_response_not_found"},
		{`{"model":"m","input":"hi","stream":true,"previous_response_id":"resp_1"}`, http.StatusBadRequest, "previous_response_id", "previous_response_not_found"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, http.StatusBadRequest, "conversation", ""},
	} {
		status, body := tunnel(t, p, "/v1/responses", tc.body)
		v := decodeAnswer(t, body)
		if status != tc.status || v.Error.Param != tc.param || v.Error.Code != tc.code || (tc.status == http.StatusOK && v.Status != "completed") {
			t.Errorf("%s: %d %s", tc.body, status, body)
		}
	}
}

// TestTunnelMessagesThinkingAndPrefill: the sim's Messages API refuses
// extended thinking, which it does not do (a 400 naming thinking, in
// Anthropic's shape), takes thinking disabled, and continues a prefill.
func TestTunnelMessagesThinkingAndPrefill(t *testing.T) {
	p := New(Config{})
	status, body := tunnel(t, p, "/v1/messages", `{"model":"m","max_tokens":9,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusBadRequest || e.Type != "error" || e.Error.Type != "invalid_request_error" ||
		!bytes.HasPrefix([]byte(e.Error.Message), []byte("thinking:")) {
		t.Errorf("thinking: %d %s", status, body)
	}
	for body, want := range map[string]string{
		`{"model":"m","max_tokens":64,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`:                 "You said: hi. This answer comes from iop-sim, the built-in simulated model.",
		`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"You said: hi."}]}`: " This answer comes from iop-sim, the built-in simulated model.",
	} {
		status, b := tunnel(t, p, "/v1/messages", body)
		var m struct{ Content []struct{ Text string } }
		if err := json.Unmarshal(b, &m); err != nil || status != http.StatusOK || len(m.Content) != 1 || m.Content[0].Text != want {
			t.Errorf("%s: %d %s, want %q", body, status, b, want)
		}
	}
}

// TestTunnelCompletions: the sim's legacy completions honour stop and
// echo (the prompt back before the answer, JSON and stream), and refuse
// what they cannot make — more prompts or choices than one, log
// probabilities, a suffix — naming the field.
func TestTunnelCompletions(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for _, tc := range []struct{ body, text, param string }{
		{`{"model":"m","prompt":"hi"}`, "You said: hi. This answer comes from iop-sim, the built-in simulated model.", ""},
		{`{"model":"m","prompt":["hi"],"stop":"comes"}`, "You said: hi. This answer ", ""},
		{`{"model":"m","prompt":"hi","stop":["nowhere","answer"],"echo":true}`, "hiYou said: hi. This ", ""},
		{`{"model":"m","prompt":"hi","n":1,"best_of":1,"suffix":""}`, "You said: hi. This answer comes from iop-sim, the built-in simulated model.", ""},
		{`{"model":"m","prompt":["a","b"]}`, "", "prompt"},
		{`{"model":"m","prompt":"hi","n":2}`, "", "n"},
		{`{"model":"m","prompt":"hi","best_of":3}`, "", "best_of"},
		{`{"model":"m","prompt":"hi","logprobs":0}`, "", "logprobs"},
		{`{"model":"m","prompt":"hi","suffix":"end"}`, "", "suffix"},
		{`{"model":"m","prompt":"hi","stop":[1]}`, "", "stop"},
	} {
		status, body := tunnel(t, p, "/v1/completions", tc.body)
		var v struct {
			Choices []struct{ Text string }
			Error   struct{ Param string }
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v: %s", tc.body, err, body)
		}
		switch {
		case tc.param != "" && (status != http.StatusBadRequest || v.Error.Param != tc.param):
			t.Errorf("%s: %d %s, want a 400 naming %s", tc.body, status, body, tc.param)
		case tc.param == "" && (status != http.StatusOK || len(v.Choices) != 1 || v.Choices[0].Text != tc.text):
			t.Errorf("%s: %d %s, want %q", tc.body, status, body, tc.text)
		}
	}
	status, body := tunnel(t, p, "/v1/completions", `{"model":"m","prompt":"hi","stream":true,"echo":true,"stop":"This"}`)
	var text string
	for _, line := range bytes.Split(body, []byte("\n\n")) {
		var c struct{ Choices []struct{ Text string } }
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && string(d) != "[DONE]" && json.Unmarshal(d, &c) == nil && len(c.Choices) == 1 {
			text += c.Choices[0].Text
		}
	}
	if status != http.StatusOK || text != "hiYou said: hi. " {
		t.Errorf("stream: %d %q: %s", status, text, body)
	}
}

// TestTunnelStoredResponseNotFound: the sim stores no response, so a
// request naming one — retrieve, delete, cancel, input items — is the
// not-found of a server that does not have it.
func TestTunnelStoredResponseNotFound(t *testing.T) {
	p := New(Config{})
	for _, r := range []struct{ method, path string }{{http.MethodGet, "/v1/responses/resp_1"}, {http.MethodDelete, "/v1/responses/resp_1"},
		{http.MethodPost, "/v1/responses/resp_1/cancel"}, {http.MethodGet, "/v1/responses/resp_1/input_items?limit=5"}} {
		var status int
		var body bytes.Buffer
		em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
			if f.Type == execution.FrameTypeResponseStart {
				status = f.Status
			}
			body.Write(f.Body)
		})
		if err := p.Tunnel(t.Context(), &execution.ProviderTunnelRequest{Method: r.method, Path: r.path}, em); err != nil {
			t.Fatal(err)
		}
		if v := decodeAnswer(t, body.Bytes()); status != http.StatusNotFound || !strings.HasPrefix(v.Error.Message, "Response with id 'resp_1' not found") {
			t.Errorf("%s %s: %d %s", r.method, r.path, status, body.Bytes())
		}
	}
}

// TestTunnelMessagesStopSequence: a stop sequence ends the sim's Messages
// answer as the API reports it — stop_reason stop_sequence, naming the
// sequence — in a JSON answer and in the stream's message_delta.
func TestTunnelMessagesStopSequence(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	const req = `{"model":"m","max_tokens":64,"stop_sequences":["nowhere","comes"],"messages":[{"role":"user","content":"hi"}]`
	_, body := tunnel(t, p, "/v1/messages", req+`}`)
	var m struct {
		Content      []struct{ Text string }
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	}
	if err := json.Unmarshal(body, &m); err != nil || len(m.Content) != 1 || m.Content[0].Text != "You said: hi. This answer " ||
		m.StopReason != "stop_sequence" || m.StopSequence == nil || *m.StopSequence != "comes" {
		t.Errorf("JSON: %s", body)
	}
	_, body = tunnel(t, p, "/v1/messages", req+`,"stream":true}`)
	var delta struct {
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		}
	}
	for _, ev := range bytes.Split(body, []byte("\n\n")) {
		if d, ok := bytes.CutPrefix(ev, []byte("event: message_delta\ndata: ")); ok {
			_ = json.Unmarshal(d, &delta)
		}
	}
	if delta.Delta.StopReason != "stop_sequence" || delta.Delta.StopSequence == nil || *delta.Delta.StopSequence != "comes" {
		t.Errorf("stream: %s", body)
	}
	// Without a stop sequence met: end_turn and no sequence.
	_, body = tunnel(t, p, "/v1/messages", `{"model":"m","max_tokens":64,"stop_sequences":["nowhere"],"messages":[{"role":"user","content":"hi"}]}`)
	m.StopSequence = nil
	if err := json.Unmarshal(body, &m); err != nil || m.StopReason != "end_turn" || m.StopSequence != nil {
		t.Errorf("no stop met: %s", body)
	}
}

// TestTunnelModerationInputs: a moderation of a string or of strings gets
// a result each; one of text parts (omni-moderation's multimodal form)
// one result for them all; an image part, which the sim cannot judge, a
// 400 naming input.
func TestTunnelModerationInputs(t *testing.T) {
	p := New(Config{})
	for body, results := range map[string]int{
		`{"model":"m","input":"a"}`:                                                     1,
		`{"model":"m","input":["a","b","c"]}`:                                           3,
		`{"model":"m","input":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`: 1,
		`{"model":"m","input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]}`: 0,
		`{"model":"m","input":[]}`: 0,
		`{"model":"m","input":7}`:  0,
	} {
		status, b := tunnel(t, p, "/v1/moderations", body)
		var v struct {
			Results []json.RawMessage
			Error   struct{ Param string }
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.Results) != results || (results == 0) != (status == http.StatusBadRequest) ||
			(results == 0 && v.Error.Param != "input") {
			t.Errorf("%s: %d %s, want %d results", body, status, b, results)
		}
	}
}

// TestTunnelRerankTopNAndDocuments: top_n 0 is all the documents (vLLM's
// reading), and return_documents false leaves their text out.
func TestTunnelRerankTopNAndDocuments(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct {
		body      string
		results   int
		documents bool
	}{
		{`{"query":"tea","documents":["coffee","green tea","tea"]}`, 3, true},
		{`{"query":"tea","documents":["coffee","green tea","tea"],"top_n":0}`, 3, true},
		{`{"query":"tea","documents":["coffee","green tea","tea"],"top_n":1}`, 1, true},
		{`{"query":"tea","documents":["coffee","green tea","tea"],"return_documents":false}`, 3, false},
	} {
		status, body := tunnel(t, p, "/v1/rerank", tc.body)
		var v struct {
			Results []struct {
				Document *struct{ Text string }
			}
		}
		if err := json.Unmarshal(body, &v); err != nil || status != 200 || len(v.Results) != tc.results || (v.Results[0].Document != nil) != tc.documents {
			t.Fatalf("%s: %d %s", tc.body, status, body)
		}
	}
}

// TestTunnelEmbeddingsRefuseEmptyInput: an empty text or token array has
// nothing to embed, and is refused as OpenAI refuses it, not given a
// vector and a token charged.
func TestTunnelEmbeddingsRefuseEmptyInput(t *testing.T) {
	p := New(Config{})
	for _, body := range []string{`{"model":"m","input":""}`, `{"model":"m","input":["a",""]}`, `{"model":"m","input":[[]]}`, `{"model":"m","input":[[1],[]]}`} {
		status, b := tunnel(t, p, "/v1/embeddings", body)
		if v := decodeAnswer(t, b); status != 400 || v.Error.Param != "input" {
			t.Errorf("%s: %d %s", body, status, b)
		}
	}
	if status, b := tunnel(t, p, "/v1/embeddings", `{"model":"m","input":[[1,2]]}`); status != 200 {
		t.Errorf("token ids: %d %s", status, b)
	}
}

// TestEmptyTextOutsideEmbeddings: an empty prompt or moderation input is
// answered (as OpenAI answers it); only an embedding of nothing is
// refused (TestTunnelEmbeddingsRefuseEmptyInput).
func TestEmptyTextOutsideEmbeddings(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for path, body := range map[string]string{"/v1/completions": `{"model":"m","prompt":""}`, "/v1/moderations": `{"model":"m","input":""}`} {
		if status, b := tunnel(t, p, path, body); status != http.StatusOK {
			t.Errorf("%s %s: %d %s", path, body, status, b)
		}
	}
}

// TestSimAnswersTheLastUserMessage: the sim answers what the user said
// last — not a system prompt, nor the assistant's own last words — and
// greets a conversation with nothing from the user.
func TestSimAnswersTheLastUserMessage(t *testing.T) {
	p := New(Config{TokenLatency: time.Microsecond})
	for messages, want := range map[string]string{
		`[{"role":"system","content":"be brief"}]`:                                                  "Hello from iop-sim",
		`[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello there."}]`:            "You said: hi.",
		`[{"role":"system","content":"be brief"},{"role":"user","content":"tea or coffee"}]`:        "You said: tea or coffee.",
		`[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"sunny"}]`:     "The tool returned: sunny.",
		`[{"role":"developer","content":"rules"},{"role":"assistant","content":"How can I help?"}]`: "Hello from iop-sim",
	} {
		status, body := tunnel(t, p, "/v1/chat/completions", `{"model":"m","messages":`+messages+`}`)
		var v struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal(body, &v); err != nil || status != http.StatusOK || len(v.Choices) != 1 || !strings.HasPrefix(v.Choices[0].Message.Content, want) {
			t.Errorf("%s: %d %s, want %q…", messages, status, body, want)
		}
	}
}
