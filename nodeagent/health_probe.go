package nodeagent

import (
	"sync"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
)

// ProbeTimeout is the fixed bound of one health probe.
const ProbeTimeout = 5 * time.Second

// ProbeCoordinator runs exact-target health probes for the stall watchdog
// and the capabilities command.
type ProbeCoordinator struct {
	// Timeout bounds each probe; zero means ProbeTimeout. Tests shorten it.
	Timeout time.Duration
	// Clock runs the bound (nil: the wall clock); a Bridge sets its own.
	Clock clock.Clock

	// running holds the probe goroutines, which one that ignores its
	// context outlives ProbeHealth; the bridge's Wait waits for them.
	running sync.WaitGroup
}

// ProbeHealth probes the exact target of req on p. It roots its own
// bounded context in the background — never the request's — so a cancelled
// request cannot cut the probe short and a hung provider cannot extend it.
// After the probe returns it re-checks the deadline and cancellation, and
// it feeds only the typed outcome to the normalizer; provider metadata is
// never copied. A provider without a probe fails closed (unsupported, so
// health_unknown) without any endpoint being called.
func (c *ProbeCoordinator) ProbeHealth(p execution.Provider, req execution.ProbeRequest) execution.ProbeOutcome {
	out := execution.ProbeOutcome{Requested: req}
	probe := execution.ResolveProbeFunc(p)
	if probe == nil {
		out.Unsupported = true
		return out
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = ProbeTimeout
	}
	ctx, cancel := clock.Timeout(c.Clock, timeout)
	defer cancel()

	type result struct {
		res execution.ProbeResult
		err error
	}
	done := make(chan result, 1)
	c.running.Go(func() {
		res, err := probe(ctx, req)
		done <- result{res, err}
	})
	select {
	case r := <-done:
		out.Result = execution.ProbeResult{Adapter: r.res.Adapter, InstanceKey: r.res.InstanceKey, Target: r.res.Target, Status: r.res.Status}
		out.Err = r.err
	case <-ctx.Done():
		// A probe that ignores its context is abandoned at the deadline.
	}
	if err := ctx.Err(); err != nil && out.Err == nil {
		out.Err = err
	}
	return out
}
