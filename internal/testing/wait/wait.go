// Package wait is the tests' one way to wait for a condition: poll it
// until it holds or a generous deadline passes. Tests wait on conditions,
// never on a fixed time.Sleep.
package wait

import (
	"testing"
	"time"
)

// DefaultTimeout bounds a wait; a condition still false after it fails the
// test.
const DefaultTimeout = 10 * time.Second

// Until polls cond until it returns true, failing t after DefaultTimeout.
func Until(t testing.TB, cond func() bool) {
	t.Helper()
	UntilWithin(t, DefaultTimeout, cond)
}

// UntilWithin is Until with its own deadline.
func UntilWithin(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition still false after %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}
