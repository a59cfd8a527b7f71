package streamgate

import (
	"strings"
	"testing"

	"github.com/iopgw/iop/surface"
)

// upstreamFramings are complete streams as servers other than iop's own
// fakes write them: each must reach the client byte for byte, with nothing
// appended, whatever the frame boundaries.
var upstreamFramings = []struct {
	name    string
	surface *surface.Surface
	ct      string
	body    string
}{
	{"chat spaced JSON (Python json.dumps)", surface.Chat, "text/event-stream",
		"data: {\"id\": \"c1\", \"choices\": [{\"index\": 0, \"delta\": {\"content\": \"hi\"}, \"finish_reason\": null}]}\n\n" +
			"data: {\"id\": \"c1\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n"},
	{"chat no space after data:", surface.Chat, "text/event-stream",
		"data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata:[DONE]\n\n"},
	{"chat CRLF with keep-alive comments", surface.Chat, "text/event-stream; charset=utf-8",
		": ping\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\n: ping\r\n\r\ndata: [DONE]\r\n\r\n"},
	{"chat without [DONE], finish_reason on the content chunk", surface.Chat, "text/event-stream",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done.\"},\"finish_reason\":\"stop\"}]}\n\n"},
	{"chat usage chunk after finish, then [DONE] without final blank line", surface.Chat, "text/event-stream",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\ndata: [DONE]"},
	{"chat multi-line data", surface.Chat, "text/event-stream",
		"data: {\"choices\":\ndata: [{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}\n\n"},
	{"chat two choices", surface.Chat, "text/event-stream",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"},{\"index\":1,\"delta\":{\"content\":\"b\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"},
	{"chat error event after content (the upstream's own terminal)", surface.Chat, "text/event-stream",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\": {\"message\": \"overloaded\", \"type\": \"server_error\"}}\n\n"},
	{"responses without event: lines, spaced", surface.Responses, "text/event-stream",
		"data: {\"type\": \"response.created\", \"sequence_number\": 0}\n\ndata: {\"type\": \"response.output_text.delta\", \"sequence_number\": 1, \"delta\": \"hi\"}\n\ndata: {\"type\": \"response.completed\", \"sequence_number\": 2, \"response\": {\"usage\": {\"input_tokens\": 1, \"output_tokens\": 1, \"total_tokens\": 2}}}\n\n"},
	{"responses with event: lines, CR line ends", surface.Responses, "text/event-stream",
		"event: response.created\rdata: {\"type\":\"response.created\",\"sequence_number\":0}\r\revent: response.incomplete\rdata: {\"type\":\"response.incomplete\",\"sequence_number\":1}\r\r"},
	{"ollama NDJSON with spaces", surface.OllamaChat, "application/x-ndjson",
		"{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"hi\"}, \"done\": false}\n{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\"}, \"done\": true, \"eval_count\": 3}\n"},
	{"ollama NDJSON without a final newline", surface.OllamaGenerate, "application/x-ndjson",
		"{\"response\":\"hi\",\"done\":false}\n{\"response\":\"\",\"done\":true}"},
}

func TestTunnelUpstreamFramings(t *testing.T) {
	for _, tc := range upstreamFramings {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(12) {
				hdr := map[string][]string{"Content-Type": {tc.ct}}
				d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "p", items: framesOf([]byte(tc.body), seed, hdr)}}}
				w := serve(t, d, &Request{Surface: tc.surface, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
				if w.Code != 200 || w.Body.String() != tc.body {
					t.Fatalf("seed %d: status %d body\n got %q\nwant %q", seed, w.Code, w.Body.String(), tc.body)
				}
			}
		})
	}
}

// TestTunnelTerminalLikeTextIsNotATerminal: model output that merely
// contains text such as "data: [DONE]" or "event: error" is content; a
// stream cut after it is a typed truncation, not a success.
func TestTunnelTerminalLikeTextIsNotATerminal(t *testing.T) {
	tests := []struct {
		name    string
		surface *surface.Surface
		ct      string
		body    string
		wantEnd string
	}{
		{"chat", surface.Chat, "text/event-stream",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"say \\\"data: [DONE]\\\" and event: error, \\\"finish_reason\\\":\\\"stop\\\"\"}}]}\n\n", `"code":"upstream_error"`},
		{"responses", surface.Responses, "text/event-stream",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"delta\":\"\\\"type\\\":\\\"response.completed\\\"\"}\n\n", `"sequence_number":5`},
		{"ollama", surface.OllamaChat, "application/x-ndjson",
			"{\"message\":{\"role\":\"assistant\",\"content\":\"\\\"done\\\":true\"},\"done\":false}\n", `{"error":`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "p",
				items: framesOf([]byte(tc.body), 1, map[string][]string{"Content-Type": {tc.ct}})}}}
			w := serve(t, d, &Request{Surface: tc.surface, Stream: true, Model: "m"}, nil)
			got := w.Body.String()
			if !strings.HasPrefix(got, tc.body) || len(got) == len(tc.body) || !strings.Contains(got[len(tc.body):], tc.wantEnd) {
				t.Fatalf("want the stream then a typed terminal containing %s, got %q", tc.wantEnd, got)
			}
		})
	}
}

// TestTunnelErrorEventBeforeCommit: an error reported as the first event
// of a 200 stream is the upstream's error with its own status class, type
// and code; a client error is final, a server error fails over.
func TestTunnelErrorEventBeforeCommit(t *testing.T) {
	sse := map[string][]string{"Content-Type": {"text/event-stream"}}
	errStream := func(body string) []Item { return framesOf([]byte(body), 2, sse) }
	ok := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

	bad := ": ping\n\ndata: {\"error\": {\"message\": \"max_tokens is too large\", \"type\": \"invalid_request_error\", \"param\": \"max_tokens\", \"code\": \"invalid_value\"}}\n\n"
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "p", items: errStream(bad)}}, cands: Candidates{Alternates: 1}}
	w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 400 || !strings.Contains(w.Body.String(), `"type":"invalid_request_error"`) || !strings.Contains(w.Body.String(), `"code":"invalid_value"`) ||
		!strings.Contains(w.Body.String(), `"param":"max_tokens"`) || len(d.requests) != 1 {
		t.Fatalf("client error: %d %q after %d dispatches", w.Code, w.Body.String(), len(d.requests))
	}

	// vLLM's older shape, a server error: replayed on another provider.
	vllm := "data: {\"object\": \"error\", \"message\": \"engine dead\", \"type\": \"InternalServerError\", \"param\": null, \"code\": 500}\n\n"
	d = &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "p", items: errStream(vllm)},
		{kind: KindFrames, provider: "q", items: errStream(ok)}}, cands: Candidates{Alternates: 1}}
	w = serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 200 || w.Body.String() != ok || len(d.requests) != 2 {
		t.Fatalf("server error: %d %q after %d dispatches", w.Code, w.Body.String(), len(d.requests))
	}
}

// TestTunnelCommentsOnlyIsNotCommitted: keep-alive comments are not a
// response; a stream that ends after them is retried like any pre-commit
// abnormal end.
func TestTunnelCommentsOnlyIsNotCommitted(t *testing.T) {
	sse := map[string][]string{"Content-Type": {"text/event-stream"}}
	ok := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n"
	d := &fakeDispatcher{attempts: []*fakeAttempt{
		{kind: KindFrames, provider: "p", items: framesOf([]byte(": ping\n\n: ping\n\n"), 3, sse)},
		{kind: KindFrames, provider: "q", items: framesOf([]byte(ok), 3, sse)}}, cands: Candidates{Alternates: 1}}
	w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 200 || w.Body.String() != ok {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}
