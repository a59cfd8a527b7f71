// Package gcheadroom keeps Go's garbage collector from running more often
// than every so many bytes of allocation while the process is small.
//
// The collector starts a cycle when the heap has grown by GOGC percent
// (100 by default) of what the last cycle scanned: the live heap, and the
// goroutine stacks and globals beside it. A proxy's live heap is small — a
// few MiB at rest and under a load of short requests — while it allocates
// tens of KiB per request, so at GOGC=100 it collects every few MiB:
// hundreds of cycles a second, each with its fixed costs (stop the world
// twice, scan every goroutine's stack, sweep). The cost is per cycle, not
// per byte of garbage, so fewer cycles cost less CPU.
//
// Start sets GOGC after each cycle so that the next one starts headroom
// bytes of new allocation later: percent = max(base, headroom × 100 /
// scanned), scanned being what the runtime multiplies the percent by (the
// live heap, the stacks and the globals the last cycle scanned). Once
// those pass headroom × 100 / base (16 MiB at the defaults), base applies
// unchanged: a process holding thousands of streams collects exactly as
// before. What it costs is up to headroom bytes of garbage held between
// cycles while the process is small, on the way up to a large one too.
// Counting the stacks matters there: a process opening a thousand held
// streams grows its stacks faster than its heap, and a percent made for
// the heap alone let garbage pile up for twice the headroom before the
// first cycle saw them.
// GOMEMLIMIT keeps its meaning: the runtime collects when the heap nears
// the limit, whatever the percent.
package gcheadroom

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Default is the headroom the iop processes use unless configured.
const Default = 16 << 20

// Start keeps at least headroom bytes between collections (see the
// package comment) until stop is called. It does nothing, and stop does
// nothing, when headroom is not positive or the environment sets GOGC (an
// operator's own setting is left alone). Once the live heap is large the
// percent is the runtime's default, 100, and stop sets that back.
func Start(headroom int64) (stop func()) {
	if headroom <= 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	t := &tuner{headroom: uint64(headroom), base: 100, current: 100}
	t.sample[0].Name = "/gc/heap/live:bytes"
	t.sample[1].Name = "/gc/scan/stack:bytes"
	t.sample[2].Name = "/gc/scan/globals:bytes"
	t.arm()
	return sync.OnceFunc(func() {
		t.stopped.Store(true)
		debug.SetGCPercent(t.base)
	})
}

// tuner sets the percent after each collection; its sentinel's finalizer
// runs once per cycle, on the finalizer goroutine, so adjust needs no
// lock (stopped is read there and written by stop).
type tuner struct {
	headroom uint64
	base     int
	current  int
	stopped  atomic.Bool
	sample   [3]metrics.Sample // what the last cycle scanned, named once
}

// sentinel is garbage as soon as it is made: its finalizer tells the
// tuner a cycle has ended, then makes the next one.
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets the percent for what the last cycle scanned.
func (t *tuner) adjust() {
	metrics.Read(t.sample[:])
	var scanned uint64
	for _, s := range t.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return
		}
		scanned += s.Value.Uint64()
	}
	p := Percent(scanned, t.headroom, t.base)
	// A change of less than a tenth is not worth the runtime's lock.
	if d := p - t.current; d*10 > t.current || -d*10 > t.current {
		debug.SetGCPercent(p)
		t.current = p
	}
}

// maxPercent bounds the percent of a nearly empty heap.
const maxPercent = 100_000

// Percent is the GOGC that starts the next cycle headroom bytes of
// allocation after the last, for a cycle that scanned scanned bytes (live
// heap, stacks, globals: the runtime's goal is the live heap plus percent
// of those), and never less than base.
func Percent(scanned, headroom uint64, base int) int {
	if scanned == 0 {
		return maxPercent
	}
	p := headroom * 100 / scanned
	if p > maxPercent {
		return maxPercent
	}
	return max(int(p), base)
}
