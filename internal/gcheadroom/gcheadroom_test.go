package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		base, want     int
	}{
		{live: 4 << 20, headroom: 16 << 20, base: 100, want: 400},  // a small heap: the headroom decides
		{live: 16 << 20, headroom: 16 << 20, base: 100, want: 100}, // where the two meet
		{live: 64 << 20, headroom: 32 << 20, base: 100, want: 100}, // a large heap: base, unchanged
		{live: 64 << 20, headroom: 32 << 20, base: 200, want: 200},
		{live: 0, headroom: 32 << 20, base: 100, want: maxPercent},
		{live: 1, headroom: 32 << 20, base: 100, want: maxPercent}, // bounded
	} {
		if got := Percent(c.live, c.headroom, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.headroom, c.base, got, c.want)
		}
	}
}

// gogc is the collector's percent now.
func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// collectUntil runs collections (each ends with the finalizers it made
// runnable, which run on their own goroutine) until ok or a deadline.
func collectUntil(t *testing.T, ok func() bool) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		runtime.Gosched()
		if ok() {
			return true
		}
	}
	return false
}

// TestStartSetsThePercentAfterEachCycle: after a collection the percent
// leaves the headroom above the live heap; stop gives the runtime's
// default back.
func TestStartSetsThePercentAfterEachCycle(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const headroom = 1 << 30 // far above this test binary's live heap
	stop := Start(headroom)
	if !collectUntil(t, func() bool { return gogc(t) > 1000 }) {
		t.Fatalf("the percent stayed %d after collections with a 1 GiB headroom", gogc(t))
	}
	stop()
	if p := gogc(t); p != 100 {
		t.Fatalf("after stop the percent is %d, want the default 100", p)
	}
	// A stopped tuner sets nothing more.
	runtime.GC()
	runtime.GC()
	if p := gogc(t); p != 100 {
		t.Fatalf("a stopped tuner set the percent to %d", p)
	}
}

// TestOperatorsGOGCIsLeftAlone: with GOGC in the environment, or a
// headroom of 0, nothing is tuned.
func TestOperatorsGOGCIsLeftAlone(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	for _, c := range []struct {
		env      string
		headroom int64
	}{{"150", 1 << 30}, {"", 0}} {
		t.Setenv("GOGC", c.env)
		stop := Start(c.headroom)
		for range 3 {
			runtime.GC()
			runtime.Gosched()
		}
		if p := gogc(t); p != 150 {
			t.Errorf("GOGC=%q headroom %d: the percent became %d, want 150 untouched", c.env, c.headroom, p)
		}
		stop()
		if p := gogc(t); p != 150 {
			t.Errorf("GOGC=%q headroom %d: stop set the percent to %d", c.env, c.headroom, p)
		}
	}
}
