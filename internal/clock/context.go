package clock

import (
	"context"
	"sync"
	"time"
)

// Timeout returns a context rooted in the background that is done once d
// has passed on c (its Err is then context.DeadlineExceeded) or when
// cancel is called (context.Canceled). On the wall clock it is
// context.WithTimeout; on another clock it reports no Deadline, since a
// deadline in that clock's time would mislead code that compares it with
// the wall clock (a dialer, say).
func Timeout(c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if c = Or(c); c == Real {
		return context.WithTimeout(context.Background(), d)
	}
	ctx := &timeoutCtx{Context: context.Background(), done: make(chan struct{})}
	t := c.AfterFunc(d, func() { ctx.end(context.DeadlineExceeded) })
	return ctx, func() { t.Stop(); ctx.end(context.Canceled) }
}

// timeoutCtx is Timeout's context on a clock other than the wall clock.
// Its own Done channel makes a derived context wait on it (and take its
// Err) rather than attach to a parent's cancellation it does not have.
type timeoutCtx struct {
	context.Context // the background: no deadline, no values
	done            chan struct{}
	once            sync.Once
	mu              sync.Mutex
	err             error
}

func (c *timeoutCtx) Done() <-chan struct{} { return c.done }

func (c *timeoutCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *timeoutCtx) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	})
}
