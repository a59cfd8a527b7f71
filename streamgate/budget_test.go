package streamgate

import (
	"testing"
	"time"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time                            { return c.now }
func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// TestBudgetBounds is RELIABILITY.md R7's arithmetic: concurrent replays
// at most max(3, ⌈0.2 × active⌉), and per window at most 0.2 × first
// attempts + 10/s × window.
func TestBudgetBounds(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBudget(BudgetConfig{}, clk)
	var ends []func()
	for range 100 {
		ends = append(ends, b.Begin())
	}
	var releases []func()
	for {
		r, ok := b.TryAcquire()
		if !ok {
			break
		}
		releases = append(releases, r)
	}
	if len(releases) != 20 {
		t.Fatalf("%d concurrent replays with 100 active, want 20", len(releases))
	}
	releases[0]()
	releases[0]() // idempotent
	if b.InFlight() != 19 {
		t.Fatalf("in flight %d", b.InFlight())
	}
	for _, e := range ends[:95] {
		e()
	}
	for _, r := range releases[1:] {
		r()
	}
	got := 0
	for {
		r, ok := b.TryAcquire()
		if !ok {
			break
		}
		defer r()
		got++
	}
	if got != 3 {
		t.Fatalf("%d concurrent replays with 5 active, want the floor of 3", got)
	}
	// The rate bound: within one window, at most 0.2 × 100 firsts + 100.
	b2 := NewBudget(BudgetConfig{MinConcurrent: 1000}, clk)
	for range 100 {
		b2.Begin()
	}
	n := 0
	for {
		r, ok := b2.TryAcquire()
		if !ok {
			break
		}
		r()
		n++
	}
	if n != 120 {
		t.Fatalf("%d replays in a window, want 120", n)
	}
	clk.now = clk.now.Add(10 * time.Second)
	if _, ok := b2.TryAcquire(); !ok {
		t.Fatal("a new window does not refill the budget")
	}
}
