package streamgate

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/surface"
)

// wholeAnswer is a tunnelled answer read whole: status, content type,
// body (in one frame).
func wholeAnswer(status int, ct, body string) []Item {
	items := []Item{frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: status, Header: map[string][]string{"Content-Type": {ct}}})}
	if body != "" {
		items = append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte(body)}))
	}
	return append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}))
}

const goodChat = `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`

// TestTunnelWholeAnswerThatIsNotOne: a success status whose body is not
// an answer — empty, cut, not JSON where the API answers JSON, an error
// object, a whole JSON body where the client asked for a stream (its SDK
// would read an empty stream) that a stream cannot carry — is never
// passed on as a success: nothing was committed, so the request fails
// over to the next provider, whose answer the client gets.
func TestTunnelWholeAnswerThatIsNotOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		first  []Item
	}{
		{"empty body", false, wholeAnswer(200, "application/json", "")},
		{"cut JSON", false, wholeAnswer(200, "application/json", `{"id":"c","choices":[{"message":{"content":"h`)},
		{"plain text", false, wholeAnswer(200, "text/plain", "Internal Server Error")},
		{"HTML without a content type", false, wholeAnswer(200, "", "<html>bad gateway</html>")},
		{"an error object", false, wholeAnswer(200, "application/json", `{"error":{"message":"overloaded","type":"server_error"}}`)},
		{"JSON for a stream, with what a stream would carry otherwise", true, wholeAnswer(200, "application/json",
			`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":{"content":[]},"finish_reason":"stop"}]}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := wholeAnswer(200, "application/json", goodChat)
			if tc.stream {
				second = wholeAnswer(200, "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			}
			bubble.Test(t, func(t *testing.T) { // the retry's backoff in fake time
				d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "a", items: tc.first}, {kind: KindFrames, provider: "b", items: second}}}
				w := serve(t, d, &Request{Surface: surface.Chat, Stream: tc.stream, Model: "m", Snapshot: []byte("{}")}, nil)
				if w.Code != 200 || len(d.requests) != 2 || !strings.Contains(w.Body.String(), `"hi"`) {
					t.Fatalf("%d %q after %d dispatches", w.Code, w.Body.String(), len(d.requests))
				}
			})
		})
	}
}

// TestTunnelWholeAnswerAlone: with no other provider, the client gets a
// typed 502 saying what the body was (an error object: its own class and
// message); what is an answer passes through byte for byte — a JSON body,
// a transcript as text, an empty 204, an Ollama answer to a streaming
// request (one line of its stream).
func TestTunnelWholeAnswerAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		surface  *surface.Surface
		stream   bool
		items    []Item
		status   int
		contains string
	}{
		{"empty", surface.Chat, false, wholeAnswer(200, "application/json", ""), 502, "with an empty body"},
		{"cut", surface.Responses, false, wholeAnswer(200, "application/json", `{"object":"response","output":[`), 502, "not whole JSON"},
		{"JSON for a stream", surface.Responses, true, wholeAnswer(200, "application/json", `{"object":"response","status":"completed","output":[]}`), 502, "instead of an event stream"},
		{"a rate limit in a 200", surface.Chat, false, wholeAnswer(200, "application/json", `{"error":{"message":"slow down","type":"rate_limit_error"}}`), 429, "slow down"},
		{"an answer", surface.Chat, false, wholeAnswer(200, "application/json", goodChat), 200, goodChat},
		{"a failed response retrieved", surface.Responses, false, wholeAnswer(200, "application/json", `{"object":"response","status":"failed","error":{"code":"server_error","message":"x"}}`), 200, `"status":"failed"`},
		{"a transcript as text", surface.Transcriptions, false, wholeAnswer(200, "text/plain; charset=utf-8", "hello world"), 200, "hello world"},
		{"no content", surface.Chat, false, wholeAnswer(204, "", ""), 204, ""},
		{"Ollama JSON for a stream", surface.OllamaChat, true, wholeAnswer(200, "application/json", `{"message":{"role":"assistant","content":"hi"},"done":true}`), 200, `"done":true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble.Test(t, func(t *testing.T) {
				d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "a", items: tc.items}}}
				w := serve(t, d, &Request{Surface: tc.surface, Stream: tc.stream, Model: "m", Snapshot: []byte("{}")}, nil)
				if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.contains) {
					t.Fatalf("%d %q, want %d with %q", w.Code, w.Body.String(), tc.status, tc.contains)
				}
			})
		})
	}
}

// TestTunnelLargeWholeAnswer: a whole JSON answer larger than the edge
// buffers (a big batch of embeddings) goes out as it arrives, byte for
// byte, and ends with the upstream's end — it used to be read as an event
// stream past the buffer and aborted at its end for want of a terminal;
// one cut past the buffer aborts the connection, never a short body that
// looks whole.
func TestTunnelLargeWholeAnswer(t *testing.T) {
	body := []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + strings.Repeat("0.0123456789,", maxTunnelBuffer/12) + `0.1]}]}`)
	items := []Item{frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}})}
	for i := 0; i < len(body); i += 1 << 20 {
		items = append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: body[i:min(i+1<<20, len(body))]}))
	}
	whole := append(items[:len(items):len(items)], frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}))
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: whole}}}
	w := serve(t, d, &Request{Surface: surface.Embeddings, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), body) {
		t.Fatalf("%d, %d of %d bytes", w.Code, w.Body.Len(), len(body))
	}

	cut := append(items[:len(items):len(items)], frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "reset",
		Failure: execution.UpstreamFailure(&execution.UpstreamError{Status: 200, Message: "reading upstream body: unexpected EOF"})}))
	d = &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: cut}}}
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("a cut large body ended with %v, want the connection aborted", r)
		}
	}()
	serve(t, d, &Request{Surface: surface.Embeddings, Model: "m", Snapshot: []byte("{}")}, nil)
	t.Fatal("a cut large body ended cleanly")
}

// TestTunnelMislabelledStream: a streaming request's answer whose events
// came labelled text/plain or application/json (a server that does not
// set text/event-stream; SDKs read it all the same) is read as the
// surface's stream: whole, it reaches the client unchanged; cut before
// its terminal, it fails over.
func TestTunnelMislabelledStream(t *testing.T) {
	const chat = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	const ollama = "{\"message\":{\"content\":\"hi\"},\"done\":false}\n{\"message\":{\"content\":\"\"},\"done\":true}\n"
	for _, tc := range []struct {
		name     string
		surface  *surface.Surface
		ct, body string
	}{
		{"chat as text/plain", surface.Chat, "text/plain; charset=utf-8", chat},
		{"chat as JSON", surface.Chat, "application/json", chat},
		{"ollama NDJSON as JSON", surface.OllamaChat, "application/json", ollama},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "a", items: wholeAnswer(200, tc.ct, tc.body)}}}
			w := serve(t, d, &Request{Surface: tc.surface, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
			if w.Code != 200 || w.Body.String() != tc.body {
				t.Fatalf("%d %q", w.Code, w.Body.String())
			}
		})
	}
	bubble.Test(t, func(t *testing.T) {
		cut := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\"}}]}\n\n"
		d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "a", items: wholeAnswer(200, "text/plain", cut)},
			{kind: KindFrames, provider: "b", items: wholeAnswer(200, "text/event-stream", chat)}}}
		w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
		if w.Code != 200 || w.Body.String() != chat || len(d.requests) != 2 {
			t.Fatalf("a cut mislabelled stream: %d %q after %d dispatches", w.Code, w.Body.String(), len(d.requests))
		}
	})
}

// TestTunnelCompletionAsStream: a whole chat.completion answering a Chat
// streaming request (a server that does not stream) reaches the client
// as the stream of that answer — the upstream's id, model and created,
// the message (text, reasoning, tool calls), the finish, usage only when
// asked, [DONE] — which the SDKs read like any stream.
func TestTunnelCompletionAsStream(t *testing.T) {
	body := `{"id":"cmpl-9","object":"chat.completion","created":7,"model":"up/m","choices":[{"index":0,"message":{"role":"assistant","content":"the answer",` +
		`"reasoning_content":"thought","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	for _, includeUsage := range []bool{false, true} {
		d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "a", items: wholeAnswer(200, "application/json", body)}}}
		w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, IncludeUsage: includeUsage, Model: "m", Snapshot: []byte("{}")}, nil)
		got := w.Body.String()
		for _, want := range []string{`"id":"cmpl-9"`, `"created":7`, `"model":"up/m"`, `"content":"the answer"`, `"reasoning_content":"thought"`,
			`"id":"call_1"`, `"arguments":"{\"a\":1}"`, `"finish_reason":"tool_calls"`} {
			if !strings.Contains(got, want) {
				t.Errorf("usage %v: no %s in %q", includeUsage, want, got)
			}
		}
		if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(got, "data: [DONE]\n\n") ||
			strings.Contains(got, `"total_tokens":7`) != includeUsage {
			t.Errorf("usage %v: %d %s %q", includeUsage, w.Code, w.Header().Get("Content-Type"), got)
		}
	}
}
