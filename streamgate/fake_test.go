package streamgate

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/iopgw/iop/execution"
)

// fakeAttempt replays scripted items.
type fakeAttempt struct {
	kind     Kind
	provider string
	items    []Item
	delay    time.Duration // before each item
	hang     bool          // block after the items until closed
	held     []bool        // held[i]: item i had another behind it in one message (Batched)

	mu     sync.Mutex
	closed chan struct{}
	once   sync.Once
	i      int
}

func (a *fakeAttempt) Kind() Kind                  { return a.kind }
func (a *fakeAttempt) ProviderID() string          { return a.provider }
func (a *fakeAttempt) Model() string               { return "m" }
func (a *fakeAttempt) StallTimeout() time.Duration { return time.Minute }

func (a *fakeAttempt) Recv() (Item, error) {
	a.mu.Lock()
	i := a.i
	a.i++
	a.mu.Unlock()
	if a.delay > 0 {
		select {
		case <-time.After(a.delay):
		case <-a.closed:
			return Item{}, io.ErrClosedPipe
		}
	}
	if i < len(a.items) {
		return a.items[i], nil
	}
	if a.hang {
		<-a.closed
		return Item{}, io.ErrClosedPipe
	}
	return Item{}, io.EOF
}

// More implements Batched from held.
func (a *fakeAttempt) More() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.i > 0 && a.i <= len(a.held) && a.held[a.i-1]
}

func (a *fakeAttempt) Close() { a.once.Do(func() { close(a.closed) }) }

// fakeDispatcher hands out scripted attempts in order.
type fakeDispatcher struct {
	mu        sync.Mutex
	attempts  []*fakeAttempt
	requests  []DispatchRequest
	cands     Candidates
	candsFor  func(DispatchRequest) Candidates // overrides cands when set
	dispatchF func(ctx context.Context) error
}

func (d *fakeDispatcher) Dispatch(ctx context.Context, req DispatchRequest) (Attempt, error) {
	if d.dispatchF != nil {
		if err := d.dispatchF(ctx); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, req)
	if len(d.attempts) == 0 {
		return nil, ErrNoProvider
	}
	a := d.attempts[0]
	d.attempts = d.attempts[1:]
	a.closed = make(chan struct{})
	return a, nil
}

func (d *fakeDispatcher) Candidates(r DispatchRequest) Candidates {
	if d.candsFor != nil {
		return d.candsFor(r)
	}
	return d.cands
}

func ev(e execution.RunEvent) Item { return Item{Event: &e} }

func delta(s string) Item { return ev(execution.RunEvent{Type: execution.EventTypeDelta, Delta: s}) }

func complete() Item { return ev(execution.RunEvent{Type: execution.EventTypeComplete}) }

// stallItem is a validated stall terminal as the gateway hands it over.
func stallItem(confirmed bool, health string) Item {
	st := &execution.StallEvidence{Fence: execution.AttemptFenceConfirmed, Health: execution.HealthStatus(health)}
	if confirmed {
		st.HandoffConfirmed, st.ProviderID = true, "n/a"
	} else {
		st.Fence = execution.AttemptFenceUnconfirmed
	}
	return ev(execution.RunEvent{Type: execution.EventTypeError, Error: "stalled",
		Failure: &execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Metadata: st.Metadata(), Stall: st}})
}
