package streamgate

import (
	"math"
	"sync"
	"time"
)

// BudgetConfig bounds replays process-wide.
type BudgetConfig struct {
	// Ratio of active requests that may be replaying at once; default 0.2.
	Ratio float64
	// MinConcurrent replays always allowed; default 3.
	MinConcurrent int
	// Window for the rate bound; default 10s. Within a window, replays are
	// at most Ratio × first attempts + PerSecond × window.
	Window time.Duration
	// PerSecond is the rate allowance; default 10.
	PerSecond float64
}

func (c BudgetConfig) withDefaults() BudgetConfig {
	if c.Ratio <= 0 {
		c.Ratio = 0.2
	}
	if c.MinConcurrent <= 0 {
		c.MinConcurrent = 3
	}
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.PerSecond <= 0 {
		c.PerSecond = 10
	}
	return c
}

// Budget is the shared retry budget: replays (and pre-commit failovers)
// in flight at most max(MinConcurrent, ⌈Ratio × active⌉), and within each
// window at most Ratio × first attempts + PerSecond × window. It is safe
// for concurrent use.
type Budget struct {
	cfg   BudgetConfig
	clock Clock

	mu          sync.Mutex // guards the following fields
	active      int
	inFlight    int
	windowStart time.Time
	firsts      int
	replays     int
	exhausted   int
}

// NewBudget returns a budget.
func NewBudget(cfg BudgetConfig, clock Clock) *Budget {
	if clock == nil {
		clock = RealClock
	}
	return &Budget{cfg: cfg.withDefaults(), clock: clock}
}

// Begin registers an active request (its first attempt) and returns the
// function that ends it.
func (b *Budget) Begin() func() {
	b.mu.Lock()
	b.active++
	b.rollLocked()
	b.firsts++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.active--
		b.mu.Unlock()
	}
}

func (b *Budget) rollLocked() {
	now := b.clock.Now()
	if now.Sub(b.windowStart) >= b.cfg.Window {
		b.windowStart, b.firsts, b.replays = now, 0, 0
	}
}

// TryAcquire takes one replay from the budget; release returns it when
// the replayed attempt ends.
func (b *Budget) TryAcquire() (release func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rollLocked()
	maxConc := max(b.cfg.MinConcurrent, int(math.Ceil(b.cfg.Ratio*float64(b.active))))
	maxRate := int(b.cfg.Ratio*float64(b.firsts) + b.cfg.PerSecond*b.cfg.Window.Seconds())
	if b.inFlight >= maxConc || b.replays >= maxRate {
		b.exhausted++
		return nil, false
	}
	b.inFlight++
	b.replays++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.inFlight--
			b.mu.Unlock()
		})
	}, true
}

// InFlight reports replays in flight.
func (b *Budget) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}
