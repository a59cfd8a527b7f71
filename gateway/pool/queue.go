package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/iopgw/iop/streamgate"
)

// Acquire returns a lease for req, waiting in the model's FIFO queue when
// every eligible provider is busy. It fails fast with ErrNoProvider when
// nothing eligible serves the model, and with ErrQueueFull or
// ErrQueueTimeout when the queue is full or the wait too long. A request
// cancelled while queued is never sent upstream.
func (p *Pool) Acquire(ctx context.Context, req ProviderPoolDispatchRequest) (*Lease, error) {
	p.mu.Lock()
	cands, _ := p.eligibleLocked(req)
	if len(cands) == 0 {
		p.mu.Unlock()
		return nil, fmt.Errorf("model %q: %w", req.Model, streamgate.ErrNoProvider)
	}
	if pp := p.pickLocked(cands, req); pp != nil {
		l := p.leaseLocked(pp, req)
		p.mu.Unlock()
		return l, nil
	}
	qc := p.cfgQueue(req.Model)
	if req.Queue != nil {
		qc = req.Queue(req.Model)
	}
	q := p.queueLocked(req.Model)
	if len(q.waiters) >= qc.MaxLength {
		p.mu.Unlock()
		p.countQueueRejected("full")
		return nil, streamgate.ErrQueueFull
	}
	w := &waiter{req: req, ch: make(chan result, 1)}
	q.waiters = append(q.waiters, w)
	p.mu.Unlock()
	return p.wait(ctx, w, qc.MaxWait)
}

func (p *Pool) wait(ctx context.Context, w *waiter, maxWait time.Duration) (*Lease, error) {
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case r := <-w.ch:
		return r.lease, r.err
	case <-ctx.Done():
		p.abandon(w)
		return nil, ctx.Err()
	case <-t.C:
		if p.abandon(w) {
			p.countQueueRejected("timeout")
			return nil, streamgate.ErrQueueTimeout
		}
		r := <-w.ch // assigned while timing out: use it
		return r.lease, r.err
	}
}

// abandon removes a waiter; if it was assigned meanwhile, the lease goes
// back. It reports whether the waiter was still queued.
func (p *Pool) abandon(w *waiter) bool {
	p.mu.Lock()
	q := p.queues[w.req.Model]
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			p.mu.Unlock()
			return true
		}
	}
	p.mu.Unlock()
	select {
	case r := <-w.ch:
		if r.lease != nil {
			r.lease.Release()
		}
	default:
	}
	return false
}

// release returns a lease's slot and re-resolves the queues.
func (p *Pool) release(l *Lease) {
	p.mu.Lock()
	l.slot.inFlight--
	p.pumpLocked()
	p.mu.Unlock()
}

// pumpLocked hands free slots to queued requests in FIFO order per model,
// each with its own avoidance filter; a waiter nothing can ever serve
// fails with ErrNoProvider.
func (p *Pool) pumpLocked() {
	for _, q := range p.queues {
		kept := q.waiters[:0]
		for _, w := range q.waiters {
			cands, _ := p.eligibleLocked(w.req)
			if len(cands) == 0 {
				w.ch <- result{err: streamgate.ErrNoProvider}
				continue
			}
			if pp := p.pickLocked(cands, w.req); pp != nil {
				w.ch <- result{lease: p.leaseLocked(pp, w.req)}
				continue
			}
			kept = append(kept, w)
		}
		q.waiters = kept
	}
}

func (p *Pool) failUnservableLocked() { p.pumpLocked() }

func (p *Pool) queueLocked(model string) *waitQueue {
	q := p.queues[model]
	if q == nil {
		q = &waitQueue{}
		p.queues[model] = q
	}
	return q
}

type waitQueue struct{ waiters []*waiter }

type waiter struct {
	req ProviderPoolDispatchRequest
	ch  chan result
}

type result struct {
	lease *Lease
	err   error
}

// QueueDepth returns the number of requests waiting for model.
func (p *Pool) QueueDepth(model string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.queues[model]; q != nil {
		return len(q.waiters)
	}
	return 0
}

func (p *Pool) countQueueRejected(reason string) {
	if p.metrics != nil {
		p.metrics.queueRejected.WithLabelValues(reason).Inc()
	}
}
