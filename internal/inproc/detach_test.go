package inproc

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A detached handler's stream outlives the handler: its messages go both
// ways with no goroutine of the handler's, and its end — called from
// whatever goroutine goes on with it — ends it with that status, after
// what was sent before.
func TestDetachedStreamOutlivesItsHandler(t *testing.T) {
	ends := make(chan func(error), 1)
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		end, ok := Detach(ss.Context())
		if !ok {
			t.Error("Detach refused an in-process handler's context")
			return nil
		}
		// Go on when the client's first message arrives, on a goroutine of
		// its own; the handler returns now.
		go func() {
			m := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(m); err != nil {
				end(err)
				return
			}
			if err := ss.SendMsg(wrapperspb.String("re: " + m.GetValue())); err != nil {
				end(err)
				return
			}
			ends <- end
		}()
		return nil
	}, nil)
	st := open(t, t.Context(), ch)
	waitNoHandler(t)
	if err := st.Send(wrapperspb.String("a")); err != nil {
		t.Fatalf("send after the handler returned: %v", err)
	}
	if m, err := st.Recv(); err != nil || m.GetValue() != "re: a" {
		t.Fatalf("recv %v %v", m, err)
	}
	end := <-ends
	end(status.Error(codes.Aborted, "over"))
	end(nil) // the first end counts
	if _, err := st.Recv(); status.Code(err) != codes.Aborted {
		t.Fatalf("after end: %v, want Aborted", err)
	}
	if err := st.Send(wrapperspb.String("b")); err != io.EOF {
		t.Fatalf("send after the end: %v, want io.EOF", err)
	}
}

// A detached stream still follows its client: a cancelled client context
// ends the handler's context, and a detached handler that returns an
// error ends its stream with it.
func TestDetachedStreamFollowsTheClient(t *testing.T) {
	serverCtx := make(chan context.Context, 1)
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		if _, ok := Detach(ss.Context()); !ok {
			t.Error("Detach refused")
		}
		serverCtx <- ss.Context()
		return nil
	}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	st := open(t, ctx, ch)
	sctx := <-serverCtx
	cancel()
	<-sctx.Done()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("recv after the client cancelled: %v", err)
	}

	failing := newEcho(t, func(ss grpc.ServerStream) error {
		Detach(ss.Context())
		return status.Error(codes.InvalidArgument, "bad open")
	}, nil)
	if _, err := open(t, t.Context(), failing).Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a detached handler's error: %v", err)
	}
}

// Detach refuses a context that is not an in-process handler's.
func TestDetachOutsideTheChannel(t *testing.T) {
	if end, ok := Detach(t.Context()); ok || end != nil {
		t.Fatal("Detach accepted a plain context")
	}
}

// waitNoHandler waits until no goroutine runs the channel's serve (the
// handler's goroutine has exited).
func waitNoHandler(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for range 1000 {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "inproc.(*stream).serve") {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("the handler's goroutine is still running after it detached")
}

// Pending reports a client's message waiting for the handler: none
// before the client sends, one after, none once it was received; a
// context that is not an in-process handler's has no report.
func TestPendingReportsAWaitingMessage(t *testing.T) {
	if _, ok := Pending(t.Context()); ok {
		t.Fatal("Pending answered for a context that is not a handler's")
	}
	type handler struct {
		ss      grpc.ServerStream
		pending func() bool
	}
	got := make(chan handler, 1)
	ch := newEcho(t, func(ss grpc.ServerStream) error {
		p, ok := Pending(ss.Context())
		if !ok {
			t.Error("Pending refused an in-process handler's context")
			return nil
		}
		if _, ok := Detach(ss.Context()); !ok {
			t.Error("Detach refused an in-process handler's context")
		}
		got <- handler{ss, p}
		return nil
	}, nil)
	st := open(t, t.Context(), ch)
	h := <-got
	if h.pending() {
		t.Fatal("pending before the client sent anything")
	}
	if err := st.Send(wrapperspb.String("a")); err != nil {
		t.Fatal(err)
	}
	if !h.pending() {
		t.Fatal("not pending with the client's message waiting")
	}
	if err := h.ss.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	if h.pending() {
		t.Fatal("pending after the message was received")
	}
}
