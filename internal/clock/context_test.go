package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/testing/clocktest"
)

func TestTimeoutOnAManualClock(t *testing.T) {
	m := clocktest.New()
	ctx, cancel := clock.Timeout(m, 5*time.Second)
	defer cancel()
	child, stop := context.WithCancel(ctx) // what an HTTP client derives
	defer stop()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a manual clock's context reported a wall-clock deadline")
	}
	m.Advance(5*time.Second - time.Nanosecond)
	if ctx.Err() != nil {
		t.Fatalf("done early: %v", ctx.Err())
	}
	m.Advance(time.Nanosecond)
	<-child.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("errors %v / %v, want the deadline", ctx.Err(), child.Err())
	}
}

func TestTimeoutCancelled(t *testing.T) {
	m := clocktest.New()
	ctx, cancel := clock.Timeout(m, time.Second)
	cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) || m.Pending() != 0 {
		t.Fatalf("err %v, %d timers left", ctx.Err(), m.Pending())
	}
	m.Advance(time.Second)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("the deadline replaced the cancel: %v", ctx.Err())
	}
}

func TestTimeoutOnTheWallClock(t *testing.T) {
	ctx, cancel := clock.Timeout(nil, time.Hour)
	defer cancel()
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("the wall clock's context has no deadline")
	}
}
