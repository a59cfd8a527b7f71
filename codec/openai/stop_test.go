package openai

import (
	"encoding/json"
	"testing"
)

// TestStopNamed: the stop string a server names with a choice's finish
// (vLLM's stop_reason, SGLang's matched_stop) is read; a token id, null,
// an empty string or nothing at all names none, and a completion's
// complete event carries it only when it finished with "stop".
func TestStopNamed(t *testing.T) {
	for choice, want := range map[string]string{
		`{"stop_reason":"###"}`:                        "###",
		`{"stop_reason":"\n\nHuman:"}`:                 "\n\nHuman:",
		`{"matched_stop":"END"}`:                       "END",
		`{"stop_reason":null,"matched_stop":"END"}`:    "END",
		`{"stop_reason":128009}`:                       "",
		`{"matched_stop":2}`:                           "",
		`{"stop_reason":null}`:                         "",
		`{"stop_reason":""}`:                           "",
		`{}`:                                           "",
		`{"stop_reason":["a"],"matched_stop":{"x":1}}`: "",
	} {
		var s StopNamed
		if err := json.Unmarshal([]byte(choice), &s); err != nil {
			t.Fatal(err)
		}
		if got := s.Sequence(); got != want {
			t.Errorf("%s: %q, want %q", choice, got, want)
		}
	}
	for finish, want := range map[string]string{"stop": "###", "length": ""} {
		evs, lost, ok := CompletionEvents([]byte(`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"` + finish + `","stop_reason":"###"}]}`))
		if !ok || lost != "" || evs[len(evs)-1].StopSequence != want || evs[len(evs)-1].FinishReason != finish {
			t.Errorf("%s: %+v %q %v", finish, evs, lost, ok)
		}
	}
}
