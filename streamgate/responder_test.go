package streamgate

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// failingFlush is a server writer whose flush fails, as net/http's does
// once the client connection is gone.
type failingFlush struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *failingFlush) FlushError() error {
	f.flushes++
	return errors.New("connection reset by peer")
}

// TestFlushErrorEndsTheAttempt: behind echo's response wrapper (whose
// Flush drops errors), a failed flush still ends the attempt like a
// failed write, and echo still tracks the status.
func TestFlushErrorEndsTheAttempt(t *testing.T) {
	inner := &failingFlush{ResponseRecorder: httptest.NewRecorder()}
	w := echo.NewResponse(inner, echo.New())
	a := &fakeAttempt{provider: "p", items: []Item{delta("one"), delta("two"), delta("three"), complete()}}
	d := &fakeDispatcher{attempts: []*fakeAttempt{a}}
	cfg := Config{Dispatcher: d}.WithDefaults()
	Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, w)
	if inner.flushes != 1 {
		t.Fatalf("%d flushes: the attempt went on after a failed flush", inner.flushes)
	}
	if a.i > 2 {
		t.Fatalf("the attempt was read %d times after its first write failed", a.i)
	}
	if w.Status != 200 || !w.Committed {
		t.Fatalf("echo tracked status %d committed %v", w.Status, w.Committed)
	}
}

// TestInvalidNodeStatusNeverReachesTheClient: a tunnel response_start
// with a status outside 200–599 (a 1xx, or an invented one) is answered
// with 502, with or without the commit hold (whose release runs on a timer
// goroutine no handler recover covers).
func TestInvalidNodeStatusNeverReachesTheClient(t *testing.T) {
	for _, status := range []int{42, 101, 199, 600} {
		for _, hold := range []HoldConfig{{}, {MaxDelay: time.Millisecond}} {
			hdr := map[string][]string{"Content-Type": {"text/event-stream"}}
			items := []Item{
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: status, Header: hdr}),
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")}),
			}
			a := &fakeAttempt{kind: KindFrames, provider: "p", items: items, delay: 5 * time.Millisecond}
			a.items = append(a.items, frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: [DONE]\n\n")}),
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}))
			cfg := Config{Dispatcher: &fakeDispatcher{attempts: []*fakeAttempt{a}}, Hold: hold}.WithDefaults()
			w := httptest.NewRecorder()
			Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, w)
			if w.Code != http.StatusBadGateway || status < 600 && !strings.Contains(w.Body.String(), "[DONE]") {
				t.Fatalf("status %d hold %v: client got %d %q", status, hold, w.Code, w.Body.String())
			}
		}
	}
}

// TestWholeAnswerCarriesItsLength: a tunnelled JSON answer is sent with
// the edge's Content-Length (not the node's, which is never relayed) in
// one write at the handler's end, not flushed and chunked; a stream is
// still flushed as it goes.
func TestWholeAnswerCarriesItsLength(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[]}`
	for _, tc := range []struct {
		name, ct, body string
		stream         bool
	}{
		{"json", "application/json", body, false},
		{"sse", "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string][]string{"Content-Type": {tc.ct}, "Content-Length": {"9999"}}
			items := []Item{
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr}),
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte(tc.body)}),
				frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}),
			}
			d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "p", items: items}}}
			cfg := Config{Dispatcher: d}.WithDefaults()
			rec := httptest.NewRecorder()
			Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: tc.stream, Model: "m"}, rec)
			if rec.Code != 200 || rec.Body.String() != tc.body {
				t.Fatalf("%d %q", rec.Code, rec.Body.String())
			}
			wantLen := ""
			if !tc.stream {
				wantLen = strconv.Itoa(len(tc.body))
			}
			if got := rec.Header().Get("Content-Length"); got != wantLen {
				t.Fatalf("Content-Length %q, want %q", got, wantLen)
			}
			if rec.Flushed == !tc.stream {
				t.Fatalf("flushed %v for a stream=%v answer", rec.Flushed, tc.stream)
			}
		})
	}
}

// deadlineRecorder is a server writer that records the write deadlines
// set on it, as net/http's connection takes them.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// TestWriteDeadlineFollowsTheStream: every write is bounded by the write
// timeout, less at most 1/32 of it — a burst of writes sets the
// connection's deadline once, and a write after a pause moves it.
func TestWriteDeadlineFollowsTheStream(t *testing.T) {
	const timeout = 64 * time.Second
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	r := newResponder(rec, timeout)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	r.setHead(200, http.Header{"Content-Type": {"text/event-stream"}})
	check := func(writes int, want int) {
		t.Helper()
		for range writes {
			if err := r.write([]byte("data: {}\n\n")); err != nil {
				t.Fatal(err)
			}
			if got := rec.deadlines[len(rec.deadlines)-1]; got.Before(now.Add(timeout - timeout/deadlineSlack)) {
				t.Fatalf("a write at %v is bounded by %v, under 31/32 of the timeout", now, got)
			}
		}
		if len(rec.deadlines) != want {
			t.Fatalf("%d deadlines set, want %d", len(rec.deadlines), want)
		}
	}
	check(100, 1) // a burst: the first write sets it
	now = now.Add(timeout/deadlineSlack - time.Millisecond)
	check(1, 1) // within the slack: kept
	now = now.Add(time.Millisecond)
	check(1, 2) // a full slack later: moved
	now = now.Add(10 * time.Second)
	check(3, 3)
}
