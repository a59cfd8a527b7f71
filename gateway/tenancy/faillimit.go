package tenancy

import (
	"sync"
	"time"
)

// FailLimiter counts failed authentications per client address in
// one-minute windows. Only failures are limited: a caller checks the
// credential first, so the right one always passes — one misconfigured
// or hostile client never locks out the others, nor a valid credential
// from the same address. Safe for concurrent use.
type FailLimiter struct {
	Limit func() int // failures per minute per address

	mu       sync.Mutex // guards failures
	failures map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

// maxFailAddrs bounds the addresses tracked; past it the windows start
// over (an address flood cannot grow memory).
const maxFailAddrs = 100000

// fail counts a failure from addr and reports whether it was within the
// limit (false: addr is throttled; the failure is not counted further).
func (f *FailLimiter) Fail(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	w := f.failures[addr]
	if w == nil || now.Sub(w.start) >= time.Minute {
		if f.failures == nil || len(f.failures) > maxFailAddrs {
			f.failures = map[string]*failWindow{}
		}
		w = &failWindow{start: now}
		f.failures[addr] = w
	}
	if w.n >= f.Limit() {
		return false
	}
	w.n++
	return true
}
