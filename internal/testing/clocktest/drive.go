package clocktest

import (
	"testing"
	"testing/synctest"
)

// Drive runs f on a new goroutine and, whenever every other goroutine of
// the caller's synctest bubble is durably blocked, moves the clock to its
// next armed timer, until f returns. Time on m then passes only when
// nothing else can happen, as in a discrete-event simulation: a 300 s
// watchdog fires exactly 300 s after the last progress, however loaded
// the machine. Timers run on a goroutine of their own, so one that waits
// for a later timer (a close grace after a stall) does not stop the
// clock. f blocked with no timer armed fails the test. Drive must be
// called inside a synctest bubble (bubble.Test).
func (m *Manual) Drive(t testing.TB, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	for {
		synctest.Wait()
		select {
		case <-done:
			return
		default:
		}
		d, ok := m.Next()
		if !ok {
			t.Fatal("clocktest: blocked with no timer armed")
		}
		go m.Advance(d)
	}
}
