// Package bubble runs tests in a synctest bubble (fake time) the way the
// race detector survives.
package bubble

import (
	"runtime"
	"testing"
	"testing/synctest"
)

// Test runs f in a synctest bubble, as synctest.Test does. Under the race
// detector it holds GOMAXPROCS at 1 while the bubble runs.
//
// The reason is a fault of Go's runtime (golang/go#78156): every timer of
// a bubble runs under one race context, the bubble's. A goroutine that
// receives from a timer channel whose time has passed (time.After,
// Timer.C) runs that timer itself, on its own thread, while the bubble's
// main loop may be running another timer on a second thread: two threads
// in one ThreadSanitizer context corrupt it, and the test binary dies
// ("ThreadSanitizer: CHECK failed: tsan_rtl.cpp:346" or a SIGSEGV) in
// whichever package happens to lose the race. With one P no two threads
// run Go code at once. The module's tests never run in parallel, so the
// setting belongs to the test that made it; it is put back when f's
// bubble ends.
//
// Every fake-time test of the module goes through here: a test in this
// package fails on a direct synctest.Test or synctest.Run elsewhere.
func Test(t *testing.T, f func(*testing.T)) {
	t.Helper()
	if raceEnabled {
		prev := runtime.GOMAXPROCS(1)
		defer runtime.GOMAXPROCS(prev)
	}
	synctest.Test(t, f)
}
