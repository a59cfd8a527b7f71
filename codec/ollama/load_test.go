package ollama

import (
	"encoding/json"
	"testing"
	"time"
)

// TestDecodeLoadRequests: a request that asks for no generation is told
// apart as Ollama's server does it, keep_alive read as Ollama reads it.
func TestDecodeLoadRequests(t *testing.T) {
	for _, tc := range []struct {
		body     string
		generate bool
		load     string // "" generates; "400" is refused
	}{
		{`{"model":"m"}`, true, DoneReasonLoad},
		{`{"model":"m","prompt":""}`, true, DoneReasonLoad},
		{`{"model":"m","prompt":null,"images":["aGk="]}`, true, DoneReasonLoad},
		{`{"model":"m","keep_alive":0}`, true, DoneReasonUnload},
		{`{"model":"m","keep_alive":0.0}`, true, DoneReasonUnload},
		{`{"model":"m","keep_alive":"0"}`, true, DoneReasonUnload},
		{`{"model":"m","keep_alive":"0s"}`, true, DoneReasonUnload},
		{`{"model":"m","keep_alive":"5m"}`, true, DoneReasonLoad},
		{`{"model":"m","keep_alive":-1}`, true, DoneReasonLoad},
		{`{"model":"m","keep_alive":1e300}`, true, DoneReasonLoad},
		{`{"model":"m","keep_alive":null}`, true, DoneReasonLoad},
		{`{"model":"m","keep_alive":true}`, true, "400"},
		{`{"model":"m","keep_alive":"soon"}`, true, "400"},
		{`{"model":"m","prompt":"hi","keep_alive":0}`, true, ""},
		{`{"model":"m","prompt":"hi","keep_alive":true}`, true, ""}, // as before: read only to tell an unload
		{`{"model":"m"}`, false, DoneReasonLoad},
		{`{"model":"m","messages":[]}`, false, DoneReasonLoad},
		{`{"model":"m","messages":null,"keep_alive":"0m"}`, false, DoneReasonUnload},
		{`{"model":"m","messages":[{"role":"user","content":""}]}`, false, ""},
	} {
		r, e := Decode([]byte(tc.body), tc.generate, 64)
		switch {
		case tc.load == "400":
			if e == nil || e.Status != 400 {
				t.Errorf("%s: %+v %v, want a 400", tc.body, r, e)
			}
		case e != nil:
			t.Errorf("%s: %v", tc.body, e)
		case r.Load != tc.load:
			t.Errorf("%s (generate %v): Load %q, want %q", tc.body, tc.generate, r.Load, tc.load)
		case tc.load == "" && len(r.Messages) == 0:
			t.Errorf("%s: no messages", tc.body)
		}
	}
}

// TestLoadAnswer: the answer has Ollama's fields, in its order, and reads
// back as JSON with nothing generated.
func TestLoadAnswer(t *testing.T) {
	at := time.Date(2026, 12, 7, 11, 0, 0, 5, time.UTC)
	if got, want := string(LoadAnswer(`m"1`, true, DoneReasonLoad, at)),
		`{"model":"m\"1","created_at":"2026-12-07T11:00:00.000000005Z","response":"","done":true,"done_reason":"load"}`; got != want {
		t.Errorf("generate:\n got %s\nwant %s", got, want)
	}
	b := LoadAnswer("m", false, DoneReasonUnload, at)
	var v struct {
		Message    struct{ Role, Content string }
		Done       bool
		DoneReason string `json:"done_reason"`
	}
	if err := json.Unmarshal(b, &v); err != nil || !v.Done || v.DoneReason != "unload" || v.Message.Role != "assistant" || v.Message.Content != "" {
		t.Errorf("chat: %s: %+v %v", b, v, err)
	}
}
