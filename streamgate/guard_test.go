package streamgate

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/surface"
)

// notifyLog passes each log line to ch.
type notifyLog struct{ ch chan string }

func (n *notifyLog) Write(p []byte) (int, error) {
	n.ch <- string(p)
	return len(p), nil
}

// panickyAttempt panics in Close, after closing (so Recv unblocks).
type panickyAttempt struct{ *fakeAttempt }

func (a *panickyAttempt) Close() {
	a.fakeAttempt.Close()
	panic("boom in Close")
}

// panickyDispatcher hands out a and then lets the client leave.
type panickyDispatcher struct {
	a      *panickyAttempt
	cancel context.CancelFunc
}

func (d *panickyDispatcher) Dispatch(context.Context, DispatchRequest) (Attempt, error) {
	d.a.closed = make(chan struct{})
	d.cancel()
	return d.a, nil
}
func (d *panickyDispatcher) Candidates(DispatchRequest) Candidates { return Candidates{} }

// TestPanicInRequestGoroutineEndsOnlyTheRequest: a panic in a callback
// the request owns (the client-gone context callback, here) is recovered
// and logged; the process and the handler go on and the request ends.
func TestPanicInRequestGoroutineEndsOnlyTheRequest(t *testing.T) {
	lb := &notifyLog{ch: make(chan string, 8)}
	a := &panickyAttempt{&fakeAttempt{provider: "p", items: []Item{delta("one")}, hang: true}}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Dispatcher: &panickyDispatcher{a, cancel}, Log: slog.New(slog.NewJSONHandler(lb, nil))}.WithDefaults()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }() // the handler's own Close runs on this goroutine: echo's recover covers it
		Serve(ctx, &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m"}, httptest.NewRecorder())
	}()
	// The client left: the context callback closes the attempt, which panics.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not end after a panic in its callback")
	}
	select {
	case line := <-lb.ch:
		if !strings.Contains(line, "request goroutine panicked") || strings.Contains(line, "boom") {
			t.Fatalf("log %s", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the panic was not logged")
	}
}
