package fleet

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/iopgw/iop/wire"
)

// ctxStream is an attempt stream that only has a context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context     { return s.ctx }
func (ctxStream) Send(*wire.AttemptDown) error   { return nil }
func (ctxStream) Recv() (*wire.AttemptUp, error) { return nil, context.Canceled }

// TestAttemptEnd: an attempt's waiter wakes when the attempt ends, once
// however often it is ended, and when its stream ends without it; either
// end makes it ended.
func TestAttemptEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(a *AttemptConn, cancel context.CancelFunc)
	}{
		{"the attempt", func(a *AttemptConn, _ context.CancelFunc) { a.End(); a.Finish(); a.End() }},
		{"its stream", func(_ *AttemptConn, cancel context.CancelFunc) { cancel() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a := &AttemptConn{stream: ctxStream{ctx: ctx}}
			woke := make(chan struct{})
			go func() { a.wait(); close(woke) }()
			select {
			case <-woke:
				t.Fatal("the waiter woke before the end")
			case <-time.After(20 * time.Millisecond):
			}
			if a.ended() {
				t.Fatal("ended before the end")
			}
			c.end(a, cancel)
			select {
			case <-woke:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter did not wake at the end")
			}
			if !a.ended() {
				t.Fatal("not ended after the end")
			}
			a.wait() // after the end: returns at once
		})
	}
}

// TestDetachedStreamEnds: on a detached stream whatever ends its current
// attempt — the attempt, the stream's end, or a stream that ended before
// the attempt became current — ends the stream (its attempt was not
// finished, so it is not parked again), exactly once.
func TestDetachedStreamEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(h *Hub, s ctxStream, cancel context.CancelFunc, a *AttemptConn, end func(error))
	}{
		{"the attempt ends", func(h *Hub, s ctxStream, _ context.CancelFunc, a *AttemptConn, end func(error)) {
			h.detach(s, a, end, nothingPending)
			a.End()
		}},
		{"it had ended", func(h *Hub, s ctxStream, _ context.CancelFunc, a *AttemptConn, end func(error)) {
			a.End()
			h.detach(s, a, end, nothingPending)
		}},
		{"the stream ends", func(h *Hub, s ctxStream, cancel context.CancelFunc, a *AttemptConn, end func(error)) {
			h.detach(s, a, end, nothingPending)
			cancel()
		}},
		{"the stream had ended", func(h *Hub, s ctxStream, cancel context.CancelFunc, a *AttemptConn, end func(error)) {
			cancel()
			(&detached{h: h, stream: s, end: end}).follow(a) // no watcher: follow finds the stream's end itself
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := ctxStream{ctx: ctx}
			ends := make(chan error, 2)
			c.run(&Hub{}, s, cancel, &AttemptConn{stream: s}, func(err error) { ends <- err })
			select {
			case err := <-ends:
				if err != nil {
					t.Fatalf("the stream ended with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stream did not end")
			}
			cancel()
			select {
			case <-ends:
				t.Fatal("the stream ended twice")
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// nothingPending is inproc.Pending's report for a stream whose node never
// sent its next message.
func nothingPending() bool { return false }
