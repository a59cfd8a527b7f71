// Package syncx holds small synchronization types the standard library
// lacks.
package syncx

import "sync"

// Event is a one-time signal (after grpc-go's internal/grpcsync.Event):
// Fire may be called any number of times from any goroutine; the first
// call closes Done.
type Event struct {
	once sync.Once
	c    chan struct{}
}

// NewEvent returns an unfired event.
func NewEvent() *Event { return &Event{c: make(chan struct{})} }

// Fire signals the event; it reports whether this call did.
func (e *Event) Fire() bool {
	fired := false
	e.once.Do(func() {
		close(e.c)
		fired = true
	})
	return fired
}

// Done is closed once the event has fired.
func (e *Event) Done() <-chan struct{} { return e.c }

// HasFired reports whether the event has fired.
func (e *Event) HasFired() bool {
	select {
	case <-e.c:
		return true
	default:
		return false
	}
}
