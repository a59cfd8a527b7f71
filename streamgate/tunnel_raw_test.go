package streamgate

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// TestTunnelRawBodyPassesThrough: a binary answer (speech audio) is
// written as its frames arrive, byte for byte, and ends with the
// upstream's end; one cut after its first bytes aborts the connection
// (a binary body has no in-band terminal), never a short file that
// looks whole.
func TestTunnelRawBodyPassesThrough(t *testing.T) {
	hdr := map[string][]string{"Content-Type": {"audio/wav"}}
	wav := bytes.Repeat([]byte{'R', 'I', 'F', 'F', 0, 1, 2, 3}, 512)
	items := []Item{frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr})}
	for i := 0; i < len(wav); i += 1000 {
		items = append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: wav[i:min(i+1000, len(wav))]}))
	}
	items = append(items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}))
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w := serve(t, d, &Request{Surface: surface.Speech, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), wav) || w.Header().Get("Content-Type") != "audio/wav" {
		t.Fatalf("%d %s, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}

	cut := []Item{items[0], items[1],
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "reset",
			Failure: execution.UpstreamFailure(&execution.UpstreamError{Status: 200, Message: "reading upstream body: unexpected EOF"})})}
	d = &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: cut}}}
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("a cut binary body ended with %v, want the connection aborted", r)
		}
	}()
	serve(t, d, &Request{Surface: surface.Speech, Model: "m", Snapshot: []byte("{}")}, nil)
	t.Fatal("a cut binary body ended cleanly")
}

// TestTunnelRawEmptyBodySendsItsHead: a binary answer without a byte is
// answered with the upstream's head — its status and headers, from the
// head the responder kept — and an empty body.
func TestTunnelRawEmptyBodySendsItsHead(t *testing.T) {
	hdr := map[string][]string{"Content-Type": {"audio/wav"}, "X-Request-Id": {"up-1"}}
	items := []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 203, Header: hdr}),
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}),
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items}}}
	w := serve(t, d, &Request{Surface: surface.Speech, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 203 || w.Body.Len() != 0 || w.Header().Get("Content-Type") != "audio/wav" || w.Header().Get("X-Request-Id") != "up-1" {
		t.Fatalf("%d, %d bytes, header %v", w.Code, w.Body.Len(), w.Header())
	}
}

// TestResponderKeepsNoHeadOnceWritten: once the head is written the
// writer's header map holds it; the responder lets its own go (a held
// stream keeps one map of its head, not two).
func TestResponderKeepsNoHeadOnceWritten(t *testing.T) {
	w := httptest.NewRecorder()
	r := newResponder(w, 0)
	r.setHead(200, http.Header{"Content-Type": {"text/event-stream"}})
	if err := r.write([]byte("data: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	if r.header != nil {
		t.Fatal("the responder still holds the head it wrote")
	}
	if w.Header().Get("Content-Type") != "text/event-stream" || w.Code != 200 {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
}
