package streamgate

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/clocktest"
	"github.com/iopgw/iop/surface"
)

func frame(f execution.ProviderTunnelFrame) Item { return Item{Frame: &f} }

// framesOf splits body at random points into body frames.
func framesOf(body []byte, seed uint64, header map[string][]string) []Item {
	r := rand.New(rand.NewPCG(seed, 1))
	items := []Item{frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: header})}
	for len(body) > 0 {
		n := min(len(body), 1+r.IntN(64))
		items = append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: body[:n]}))
		body = body[n:]
	}
	return append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}))
}

// TestTunnelDisabledFilterIsByteIdentical: with semantic filtering
// disabled, recorded upstream streams reach the client byte for byte, with
// their status and end-to-end headers, whatever the frame boundaries.
func TestTunnelDisabledFilterIsByteIdentical(t *testing.T) {
	files, _ := filepath.Glob("testdata/tunnel/*.sse")
	if len(files) < 4 {
		t.Fatalf("corpus has %d streams", len(files))
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(20) {
			sf := surface.Chat
			if strings.Contains(f, "responses") {
				sf = surface.Responses
			}
			hdr := map[string][]string{"Content-Type": {"text/event-stream; charset=utf-8"}, "X-Request-Id": {"req_123"}, "Openai-Processing-Ms": {"42"}}
			d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: framesOf(body, seed, hdr)}}}
			w := serve(t, d, &Request{Surface: sf, Stream: true, Model: "m"}, nil)
			if w.Body.String() != string(body) {
				t.Fatalf("%s seed %d: body differs\n got %q\nwant %q", f, seed, w.Body.String(), body)
			}
			if w.Code != 200 || w.Header().Get("X-Request-Id") != "req_123" || w.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Fatalf("%s: status %d headers %v", f, w.Code, w.Header())
			}
		}
	}
}

// TestTunnelAbnormalEndAfterCommit: an upstream that dies mid-event gets
// a blank line and a typed terminal, never a tidy end.
func TestTunnelAbnormalEndAfterCommit(t *testing.T) {
	hdr := map[string][]string{"Content-Type": {"text/event-stream"}}
	items := []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"l")}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "reset", Failure: execution.UpstreamFailure(&execution.UpstreamError{Status: 200, Message: "reading upstream body: unexpected EOF"})}),
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
	want := "data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"l\n\ndata: {\"error\":"
	if !strings.HasPrefix(w.Body.String(), want) || !strings.Contains(w.Body.String(), `"type":"upstream_error"`) {
		t.Fatalf("body %q", w.Body.String())
	}
	// Responses: error + response.failed with the next sequence numbers.
	items = []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"x\"}\n\n")}),
		stallItem(true, "available"),
	}
	d = &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w = serve(t, d, &Request{Surface: surface.Responses, Stream: true, Model: "m"}, nil)
	if !strings.Contains(w.Body.String(), `"sequence_number":2`) || !strings.Contains(w.Body.String(), "event: response.failed") ||
		!strings.Contains(w.Body.String(), `"sequence_number":3`) || !strings.Contains(w.Body.String(), `"code":"response_stalled"`) {
		t.Fatalf("responses body %q", w.Body.String())
	}
}

// TestTunnelUpstreamErrorPassThrough: a 4xx is passed through verbatim.
func TestTunnelUpstreamErrorPassThrough(t *testing.T) {
	body := `{"error":{"message":"Invalid 'messages'.","type":"invalid_request_error","param":"messages","code":null}}`
	items := []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 400, Header: map[string][]string{"Content-Type": {"application/json"}, "X-Request-Id": {"req_up"}}}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte(body)}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}),
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w := serve(t, d, &Request{Surface: surface.Chat, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 400 || w.Body.String() != body || w.Header().Get("X-Request-Id") != "req_up" || len(d.requests) != 1 {
		t.Fatalf("%d %q %v (%d dispatches)", w.Code, w.Body.String(), w.Header(), len(d.requests))
	}
}

func TestFilterBlockAndRedact(t *testing.T) {
	f, err := NewFilter([]FilterRule{{Pattern: `(?i)secret-\d+`, Action: "redact"}, {Pattern: "forbidden", Action: "block"}})
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{provider: "n/a", items: []Item{delta("code SECRET-42 ok"), complete()}}}}
	cfg := Config{Dispatcher: d, Filter: f}.WithDefaults()
	w := httptestServe(&cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"})
	if strings.Contains(w, "SECRET-42") || !strings.Contains(w, "[redacted]") {
		t.Fatalf("redact: %s", w)
	}
	d = &fakeDispatcher{attempts: []*fakeAttempt{{provider: "n/a", items: []Item{delta("fine"), delta("forbidden word"), complete()}}}}
	cfg.Dispatcher = d
	w = httptestServe(&cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"})
	if strings.Contains(w, "forbidden") || !strings.Contains(w, `"code":"content_filter"`) || strings.Contains(w, "[DONE]") {
		t.Fatalf("block: %s", w)
	}
	if _, err := NewFilter([]FilterRule{{Pattern: "(", Action: "block"}}); err == nil {
		t.Fatal("bad pattern accepted")
	}
	if (&Filter{}).enabled() || (*Filter)(nil).enabled() {
		t.Fatal("an empty filter is enabled")
	}
}

func httptestServe(cfg *Config, req *Request) string {
	w := newRecorder()
	Serve(contextBackground(), cfg, req, w)
	return w.Body.String()
}

// TestCommitHoldWidensReplayWindow: with a hold of 3 events, a stall after
// two tokens is still uncommitted and replays cleanly.
func TestCommitHoldWidensReplayWindow(t *testing.T) {
	d := &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{
		{provider: "n/a", items: []Item{delta("<first-1>"), delta("<first-2>"), stallItem(true, "available")}},
		{provider: "n/b", items: []Item{delta("<second-1>"), delta("<second-2>"), delta("<second-3>"), complete()}},
	}}
	cfg := Config{Dispatcher: d, Hold: HoldConfig{MaxEvents: 3, MaxDelay: time.Minute}}.WithDefaults()
	body := httptestServe(&cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")})
	if strings.Contains(body, "<first-") || !strings.Contains(body, "<second-1>") || !strings.Contains(body, "[DONE]") {
		t.Fatalf("body %s", body)
	}
	// Without a hold the first token commits and the stall is terminal.
	d = &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{{provider: "n/a", items: []Item{delta("<first-1>"), stallItem(true, "available")}}}}
	cfg = Config{Dispatcher: d}.WithDefaults()
	body = httptestServe(&cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")})
	if !strings.Contains(body, "<first-1>") || !strings.Contains(body, `"code":"response_stalled"`) {
		t.Fatalf("body %s", body)
	}
}

// TestHoldReleasesOnDelay: held output goes out after MaxDelay even if no
// more events come — on the runtime's clock (synctest only waits for the
// goroutines to settle).
func TestHoldReleasesOnDelay(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		d := &fakeDispatcher{attempts: []*fakeAttempt{{provider: "n/a", items: []Item{delta("x")}, hang: true}}}
		cfg := Config{Dispatcher: d, Clock: clk, Hold: HoldConfig{MaxEvents: 100, MaxDelay: 50 * time.Millisecond}}.WithDefaults()
		w := newRecorder()
		done := make(chan struct{})
		ctx, cancel := contextWithCancel()
		go func() { Serve(ctx, &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, w); close(done) }()
		synctest.Wait()
		clk.Advance(49 * time.Millisecond)
		synctest.Wait()
		if strings.Contains(w.BodyString(), `"content":"x"`) {
			t.Fatal("held output released before MaxDelay")
		}
		clk.Advance(time.Millisecond)
		synctest.Wait()
		if !strings.Contains(w.BodyString(), `"content":"x"`) {
			t.Fatalf("held output not released at MaxDelay: %q", w.BodyString())
		}
		cancel()
		<-done
	})
}

// TestTunnelEndedBeforeTheLinkBroke: the upstream's own end ([DONE])
// reached the client, then the attempt broke before its end frame (the
// node or its link went away): the stream ends as the upstream ended it —
// nothing after [DONE], no error, a success — while a break before the
// end marker still gets the typed terminal.
func TestTunnelEndedBeforeTheLinkBroke(t *testing.T) {
	hdr := map[string][]string{"Content-Type": {"text/event-stream"}}
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	items := []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte(body)}),
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}} // then io.EOF: the link is gone
	w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, nil)
	if w.Body.String() != body || len(d.requests) != 1 {
		t.Fatalf("body %q after %d dispatches", w.Body.String(), len(d.requests))
	}
	items[1] = frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte(body[:strings.Index(body, "data: [DONE]")])})
	d = &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w = serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, nil)
	if !strings.Contains(w.Body.String(), `"type":"upstream_error"`) {
		t.Fatalf("a break before [DONE] must end with the typed terminal: %q", w.Body.String())
	}
}
