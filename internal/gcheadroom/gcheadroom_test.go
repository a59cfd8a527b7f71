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
		scanned, headroom uint64
		base, want        int
	}{
		{scanned: 4 << 20, headroom: 16 << 20, base: 100, want: 400},  // a small process: the headroom decides
		{scanned: 16 << 20, headroom: 16 << 20, base: 100, want: 100}, // where the two meet
		{scanned: 64 << 20, headroom: 32 << 20, base: 100, want: 100}, // a large one: base, unchanged
		{scanned: 64 << 20, headroom: 32 << 20, base: 200, want: 200},
		{scanned: 0, headroom: 32 << 20, base: 100, want: maxPercent},
		{scanned: 1, headroom: 32 << 20, base: 100, want: maxPercent}, // bounded
	} {
		if got := Percent(c.scanned, c.headroom, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.scanned, c.headroom, c.base, got, c.want)
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

// scanned reads what the last cycle scanned, as the tuner does.
func scanned() (live, all uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
}

// deep grows its goroutine's stack by about n KiB, then waits for stop.
func deep(n int, stop <-chan struct{}) byte {
	var pad [1024]byte
	if n > 0 {
		pad[n%len(pad)] = deep(n-1, stop)
		return pad[0]
	}
	<-stop
	return pad[1]
}

// TestThePercentCountsStacks: the runtime's goal is the live heap plus
// percent of the live heap, the stacks and the globals, so a process
// whose goroutines hold large stacks (held streams) gets the headroom
// above its heap, not the headroom times the stacks' share.
func TestThePercentCountsStacks(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := make(chan struct{})
	defer close(stop)
	for range 64 {
		go deep(128, stop) // 64 stacks of 128+ KiB: 8 MiB or more, far above this binary's heap
	}
	const headroom = 64 << 20
	end := Start(headroom)
	defer end()
	var live, all uint64
	ok := collectUntil(t, func() bool {
		live, all = scanned()
		want := Percent(all, headroom, 100)
		p := gogc(t)
		return all > 2*live && p*10 >= want*9 && p*10 <= want*11
	})
	if !ok {
		t.Fatalf("the percent is %d; for %d bytes scanned (%d of them live heap) it should be about %d (the heap alone would give %d)",
			gogc(t), all, live, Percent(all, headroom, 100), Percent(live, headroom, 100))
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
