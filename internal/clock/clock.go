// Package clock is the time source the product's timers run on: the wall
// clock in production, a manual one in tests (internal/testing/clocktest),
// so a 300 s watchdog or a heartbeat deadline is tested without waiting.
// Every timer is a callback timer (AfterFunc); channels are made from it
// (After).
//
// clock imports nothing of ours.
package clock

import "time"

// Clock is a time source.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable, resettable timer.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

type real struct{}

func (real) Now() time.Time                            { return time.Now() }
func (real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Real is the wall clock.
var Real Clock = real{}

// Or is c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// After returns a channel closed once d has passed on c, and the timer
// behind it (Stop it when the wait ends first).
func After(c Clock, d time.Duration) (<-chan struct{}, Timer) {
	ch := make(chan struct{})
	return ch, c.AfterFunc(d, func() { close(ch) })
}

// Since is the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }
