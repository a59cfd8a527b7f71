package openai

import (
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestCompletionEvents: a whole chat.completion reads as its start, one
// delta and its completion; what those events cannot carry is named, and
// a body that is no completion is not read.
func TestCompletionEvents(t *testing.T) {
	evs, lost, ok := CompletionEvents([]byte(`{"id":"c","model":"m","created":5,"system_fingerprint":"fp","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`))
	if !ok || lost != "" || len(evs) != 3 || evs[0].Type != execution.EventTypeStart || evs[0].ResponseID != "c" || evs[0].Model != "m" || evs[0].Created != 5 ||
		evs[0].SystemFingerprint != "fp" || evs[1].Delta != "hi" || evs[2].FinishReason != "length" || evs[2].Usage == nil || evs[2].Usage.TotalTokens != 3 {
		t.Fatalf("%+v %q %v", evs, lost, ok)
	}
	for body, want := range map[string]string{
		`{"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]}`:             "choices[1]",
		`{"choices":[{"message":{"content":"a"},"logprobs":{"content":[]}}]}`:               "choices[0].logprobs",
		`{"choices":[{"message":{"content":null,"refusal":"no"}}]}`:                         "choices[0].message.refusal",
		`{"choices":[{"message":{"content":"a","annotations":[{"type":"url_citation"}]}}]}`: "choices[0].message.annotations",
		`{"choices":[{"message":{"content":null,"audio":{"id":"a"}}}]}`:                     "choices[0].message.audio",
	} {
		if _, lost, ok := CompletionEvents([]byte(body)); !ok || lost != want {
			t.Errorf("%s: lost %q, want %q", body, lost, want)
		}
	}
	for _, body := range []string{``, `{"choices":[]}`, `{"error":{"message":"x"}}`, `[1]`} {
		if _, _, ok := CompletionEvents([]byte(body)); ok {
			t.Errorf("%s read as a completion", body)
		}
	}
}
