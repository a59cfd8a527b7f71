package wire

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/iopgw/iop/execution"
)

// roundTrip sends v through its protobuf form and its wire encoding, as
// the node link does.
func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestRunRequestRoundTrip(t *testing.T) {
	in := &execution.RunRequest{RunID: "run_1", AttemptID: "att_1", SessionID: "s", ProviderID: "p", Model: "m",
		Messages: []execution.Message{{Role: "user", Content: "hi", Images: []string{"aGk="}, Name: "n"},
			{Role: "assistant", ToolCalls: []execution.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
			{Role: "tool", ToolCallID: "c1", Content: "ok"}},
		Params: execution.GenerationParams{Temperature: ptr(0.5), TopP: ptr(0.9), MaxTokens: ptr(int64(7)), Seed: ptr(int64(3)),
			Stop: []string{"x"}, Tools: json.RawMessage(`[{"type":"function"}]`), ToolChoice: json.RawMessage(`"auto"`),
			ResponseFormat: json.RawMessage(`{"type":"json_object"}`)},
		Header: map[string][]string{"Traceparent": {"00-a-b-01"}}, Stream: true, Continuation: true,
		ResponseStallTimeoutMS: 1500}
	got := RunRequestFromProto(roundTrip(t, RunRequestToProto(in)))
	if d := cmp.Diff(in, got); d != "" {
		t.Fatalf("run request changed on the wire (-sent +received):\n%s", d)
	}
}

// TestRunRequestCrossesOnce: a run with a Chat body crosses the link in
// that one form — no messages, no parameters beside it (the node parses
// them from the body).
func TestRunRequestCrossesOnce(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`)
	in := &execution.RunRequest{RunID: "run_1", Model: "m", ChatBody: body,
		Messages: []execution.Message{{Role: "user", Content: "hi"}}, Params: execution.GenerationParams{Temperature: ptr(0.5)}}
	m := roundTrip(t, RunRequestToProto(in))
	if len(m.GetMessages()) != 0 || m.GetParams() != nil || string(m.GetChatBody()) != string(body) {
		t.Fatalf("the run crossed in two forms: %v", m)
	}
	if n := proto.Size(m); n > len(body)+32 {
		t.Fatalf("%d bytes on the link for a %d-byte body", n, len(body))
	}
}

func TestRunEventRoundTrip(t *testing.T) {
	for _, ev := range []execution.RunEvent{
		{Type: execution.EventTypeStart, Model: "m", ResponseID: "chatcmpl-1", Created: 42, SystemFingerprint: "fp", ServiceTier: "default"},
		{Type: execution.EventTypeDelta, Delta: "Hel", Reasoning: "hm", ToolCalls: []execution.ToolCallDelta{{Index: 1, ID: "c", Name: "f", Arguments: "{"}}},
		{Type: execution.EventTypeComplete, FinishReason: "stop", StopSequence: "\n\nHuman:", Usage: &execution.TokenUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CachedTokens: 4, ReasoningTokens: 5}},
		{Type: execution.EventTypeError, Error: "upstream says no", Failure: &execution.ExecutionFailure{Code: execution.FailureCodeUpstreamError,
			Message: "upstream says no", Upstream: &execution.UpstreamError{Status: 429, Type: "requests", Code: "rate_limit_exceeded",
				Param: "p", Message: "upstream says no", RetryAfterMS: 20}}},
	} {
		t.Run(string(ev.Type), func(t *testing.T) {
			got := RunEventFromProto(roundTrip(t, RunEventToProto(ev, nil)))
			if ev.Failure != nil {
				// The typed failure travels as its detail; its Err is local.
				ev.Failure = &execution.ExecutionFailure{Code: ev.Failure.Code, Message: ev.Error, Upstream: ev.Failure.Upstream}
			}
			if d := cmp.Diff(ev, got, cmp.Comparer(func(a, b error) bool { return (a == nil) == (b == nil) })); d != "" {
				t.Fatalf("event changed on the wire (-sent +received):\n%s", d)
			}
		})
	}
}

func TestTunnelFrameRoundTrip(t *testing.T) {
	for _, f := range []execution.ProviderTunnelFrame{
		{Type: execution.FrameTypeResponseStart, Status: 200, Header: map[string][]string{"Content-Type": {"text/event-stream"}}},
		{Type: execution.FrameTypeBody, Body: []byte("data: {}\n\n")},
		{Type: execution.FrameTypeUsage, Usage: &execution.TokenUsage{PromptTokens: 9}},
		{Type: execution.FrameTypeEnd},
	} {
		t.Run(string(f.Type), func(t *testing.T) {
			if d := cmp.Diff(f, TunnelFrameFromProto(roundTrip(t, TunnelFrameToProto(f, nil)))); d != "" {
				t.Fatalf("frame changed on the wire (-sent +received):\n%s", d)
			}
		})
	}
}

// TestHeadersNil: both directions agree that no headers is nil.
func TestHeadersNil(t *testing.T) {
	if HeadersToProto(nil) != nil || HeadersToProto(map[string][]string{}) != nil || HeadersFromProto(nil) != nil {
		t.Fatal("empty headers are not nil on both sides")
	}
	got := HeadersFromProto([]*Header{{Name: "A", Values: []string{"1"}}, {Name: "A", Values: []string{"2"}}})
	if d := cmp.Diff(map[string][]string{"A": {"1", "2"}}, got); d != "" {
		t.Fatalf("repeated names: %s", d)
	}
}

// TestHeadersRoundTrip: headers map over and back unchanged, and the
// mapped-back map shares no room with the message: appending to a value
// (http.Header.Add) or to a repeated name leaves the message as it was.
func TestHeadersRoundTrip(t *testing.T) {
	in := map[string][]string{"Content-Type": {"text/event-stream"}, "X-Many": make([]string, 1, 4)}
	in["X-Many"][0] = "a"
	hs := HeadersToProto(in)
	got := HeadersFromProto(hs)
	if d := cmp.Diff(in, got); d != "" {
		t.Fatalf("round trip: %s", d)
	}
	got["X-Many"] = append(got["X-Many"], "b")
	if v := in["X-Many"]; len(v) != 1 || v[:2][1] != "" {
		t.Fatalf("an append to the mapped-back value wrote into the original's room: %q", v[:2])
	}
	msg := []*Header{{Name: "A", Values: make([]string, 1, 4)}, {Name: "A", Values: []string{"2"}}}
	msg[0].Values[0] = "1"
	if d := cmp.Diff(map[string][]string{"A": {"1", "2"}}, HeadersFromProto(msg)); d != "" {
		t.Fatalf("repeated names: %s", d)
	}
	if v := msg[0].Values; len(v) != 1 || v[:2][1] != "" {
		t.Fatalf("a repeated name wrote into the message's room: %q", v[:2])
	}
}
