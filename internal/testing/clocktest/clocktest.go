// Package clocktest is a manual clock for tests: time moves only when the
// test advances it, and timers due by then run in order, on the caller's
// goroutine.
package clocktest

import (
	"slices"
	"sync"
	"time"

	"github.com/iopgw/iop/internal/clock"
)

// Manual is a clock.Clock that moves only with Advance.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
	seq    int
}

var _ clock.Clock = (*Manual)(nil)

// New returns a manual clock at a fixed start.
func New() *Manual { return &Manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

type timer struct {
	c     *Manual
	at    time.Time
	seq   int // orders timers due at the same instant by arming
	f     func()
	armed bool
}

// Now implements clock.Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc implements clock.Clock.
func (m *Manual) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: m, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock by d, running every timer due by then (those
// armed by a running timer too) in due order. A timer's function may
// block on a later Advance from another goroutine; time never moves back.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	m.mu.Unlock()
	for {
		m.mu.Lock()
		t := m.nextLocked(end)
		if t == nil {
			if end.After(m.now) { // a concurrent Advance may have gone further
				m.now = end
			}
			m.mu.Unlock()
			return
		}
		m.now, t.armed = t.at, false
		m.timers = slices.DeleteFunc(m.timers, func(x *timer) bool { return x == t })
		m.mu.Unlock()
		t.f()
	}
}

// Next is how long until the earliest armed timer is due (zero when one
// is due now), and false when none is armed.
func (m *Manual) Next() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next *timer
	for _, t := range m.timers {
		if next == nil || t.at.Before(next.at) {
			next = t
		}
	}
	if next == nil {
		return 0, false
	}
	return max(next.at.Sub(m.now), 0), true
}

// Pending is how many timers are armed.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

func (m *Manual) nextLocked(end time.Time) *timer {
	var next *timer
	for _, t := range m.timers {
		if !t.at.After(end) && (next == nil || t.at.Before(next.at) || t.at.Equal(next.at) && t.seq < next.seq) {
			next = t
		}
	}
	return next
}

func (t *timer) Stop() bool {
	m := t.c
	m.mu.Lock()
	defer m.mu.Unlock()
	was := t.armed
	t.armed = false
	m.timers = slices.DeleteFunc(m.timers, func(x *timer) bool { return x == t })
	return was
}

func (t *timer) Reset(d time.Duration) bool {
	m := t.c
	m.mu.Lock()
	defer m.mu.Unlock()
	was := t.armed
	if !was {
		m.timers = append(m.timers, t)
	}
	m.seq++
	t.at, t.seq, t.armed = m.now.Add(d), m.seq, true
	return was
}
