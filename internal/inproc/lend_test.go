package inproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// goid is the calling goroutine's id, from its stack header.
func goid() int {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// collect is a handler that receives until io.EOF, noting each message
// and the goroutine it was received on, then reports them.
func collect(got chan<- []string, gid chan<- int) func(grpc.ServerStream) error {
	return func(ss grpc.ServerStream) error {
		gid <- goid()
		var msgs []string
		for {
			m := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(m); err == io.EOF {
				got <- msgs
				return nil
			} else if err != nil {
				got <- append(msgs, "error: "+err.Error())
				return err
			}
			msgs = append(msgs, m.GetValue())
		}
	}
}

// Two sends in one step would wait on the goroutine running the step: the
// second gets an error instead of a deadlock.
func TestSecondSendInAStepIsRefused(t *testing.T) {
	got, gid := make(chan []string, 1), make(chan int, 1)
	st := open(t, t.Context(), newEcho(t, collect(got, gid), nil))
	<-gid
	second := make(chan error, 1)
	lend(st).Hand(t.Context(), func() bool {
		_ = st.Send(wrapperspb.String("one"))
		second <- st.Send(wrapperspb.String("two"))
		return true
	}, func(bool, any) { _ = st.CloseSend() })
	if err := <-second; !errors.Is(err, errTwoSends) {
		t.Fatalf("second send in a step: %v, want errTwoSends", err)
	}
	if msgs := <-got; !slices.Equal(msgs, []string{"one"}) {
		t.Errorf("received %q", msgs)
	}
}

// lend is the channel's own stream under a generated stub's.
func lend(st *grpc.GenericClientStream[wrapperspb.StringValue, wrapperspb.StringValue]) *clientStream {
	return st.ClientStream.(*clientStream)
}

// handed is what a handed loan's after was called with, and where.
type handed struct {
	complete bool
	panicked any
	gid      int
}

func handInto(c chan<- handed) func(bool, any) {
	return func(complete bool, panicked any) { c <- handed{complete, panicked, goid()} }
}

// A handed loan returns at once: its steps run on the handler's
// goroutine, inside its receive — what each step sends is the next
// message received, in order with what the client sent before the loan —
// and its end runs after, once, on a goroutine of its own, which may go
// on sending on the stream.
func TestHandedStepsRunWithoutTheLender(t *testing.T) {
	got, gid := make(chan []string, 1), make(chan int, 1)
	st := open(t, t.Context(), newEcho(t, collect(got, gid), nil))
	handler := <-gid
	if err := st.Send(wrapperspb.String("head")); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	ends := make(chan handed, 2)
	n, ran := 0, map[int]bool{}
	lend(st).Hand(t.Context(), func() bool {
		<-release // no step before Hand returned
		ran[goid()] = true
		n++
		if n == 3 {
			return true
		}
		if err := st.Send(wrapperspb.String("chunk " + strconv.Itoa(n))); err != nil {
			t.Errorf("a step's send: %v", err)
		}
		return false
	}, func(complete bool, panicked any) {
		if err := st.Send(wrapperspb.String("end")); err != nil {
			t.Errorf("after's send: %v", err)
		}
		_ = st.CloseSend()
		ends <- handed{complete, panicked, goid()}
	})
	close(release)
	e := <-ends
	if !e.complete || e.panicked != nil || e.gid == handler || e.gid == goid() {
		t.Errorf("after: %+v (handler %d, lender %d)", e, handler, goid())
	}
	if len(ran) != 1 || !ran[handler] {
		t.Errorf("steps ran on goroutines %v, want only the handler's (%d)", ran, handler)
	}
	if msgs := <-got; !slices.Equal(msgs, []string{"head", "chunk 1", "chunk 2", "end"}) {
		t.Errorf("received %q", msgs)
	}
	select {
	case e := <-ends:
		t.Errorf("after ran twice: %+v", e)
	case <-time.After(20 * time.Millisecond):
	}
}

// A handed loan no receive takes up ends with the lender's context, and
// one whose stream ends, with the stream: after, not complete, no step.
func TestHandedLoanEndsWithItsContextOrStream(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	ran := 0
	step := func() bool { ran++; return true }

	st := open(t, t.Context(), newEcho(t, func(ss grpc.ServerStream) error { <-hold; return nil }, nil))
	ctx, cancel := context.WithCancel(t.Context())
	ends := make(chan handed, 1)
	lend(st).Hand(ctx, step, handInto(ends))
	cancel()
	if e := <-ends; e.complete || e.panicked != nil {
		t.Errorf("after its context: %+v", e)
	}

	st = open(t, t.Context(), newEcho(t, func(ss grpc.ServerStream) error { return nil }, nil))
	lend(st).Hand(t.Context(), step, handInto(ends))
	if e := <-ends; e.complete || e.panicked != nil {
		t.Errorf("after its stream: %+v", e)
	}
	if ran != 0 {
		t.Errorf("steps ran %d times with no receive", ran)
	}
}

// A panic in a handed step ends the loan: after gets it, the handler
// does not.
func TestPanicInAHandedStepReachesAfter(t *testing.T) {
	got, gid := make(chan []string, 1), make(chan int, 1)
	st := open(t, t.Context(), newEcho(t, collect(got, gid), nil))
	<-gid
	ends := make(chan handed, 1)
	lend(st).Hand(t.Context(), func() bool { panic("boom") }, handInto(ends))
	if e := <-ends; !e.complete || e.panicked != "boom" {
		t.Errorf("after: %+v, want the step's panic", e)
	}
	_ = st.CloseSend()
	if msgs := <-got; len(msgs) != 0 {
		t.Errorf("the handler received %q", msgs)
	}
}

// A handed loan taken back while a step runs ends after that step
// returned.
func TestHandedLoanEndsAfterTheRunningStep(t *testing.T) {
	got, gid := make(chan []string, 1), make(chan int, 1)
	st := open(t, t.Context(), newEcho(t, collect(got, gid), nil))
	<-gid
	ctx, cancel := context.WithCancel(t.Context())
	inStep, release := make(chan struct{}), make(chan struct{})
	var stepping atomic.Bool
	ends := make(chan handed, 1)
	lend(st).Hand(ctx, func() bool {
		stepping.Store(true)
		close(inStep)
		<-release
		stepping.Store(false)
		return false
	}, func(complete bool, panicked any) {
		if stepping.Load() {
			t.Error("after ran while the step was running")
		}
		ends <- handed{complete, panicked, goid()}
	})
	<-inStep
	cancel()
	select {
	case <-ends:
		t.Fatal("the loan ended while its step was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if e := <-ends; e.complete {
		t.Errorf("after: %+v, for a step that never reported done", e)
	}
	_ = st.CloseSend()
	<-got
}

// HandOn runs after on the goroutine its run starts — once, at the
// loan's end — so a lender can keep the goroutines its ends go deep on.
func TestHandOnRunsAfterOnTheLendersGoroutine(t *testing.T) {
	st := open(t, t.Context(), newEcho(t, func(ss grpc.ServerStream) error { return nil }, nil))
	ends := make(chan handed, 1)
	runs := make(chan int, 2)
	run := func(f func()) {
		go func() { runs <- goid(); f() }()
	}
	lend(st).HandOn(t.Context(), func() bool { return true }, handInto(ends), run)
	e := <-ends
	if len(runs) != 1 {
		t.Fatalf("run started %d goroutines, want 1", len(runs))
	}
	if gid := <-runs; e.gid != gid {
		t.Errorf("after ran on goroutine %d, not on the one run started (%d)", e.gid, gid)
	}
}
