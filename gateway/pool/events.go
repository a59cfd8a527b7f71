package pool

import (
	"sync"
	"time"
)

// Event is one recent stall, health or recovery observation, for the
// admin status page. Fields are closed vocabularies plus the edge-owned
// provider id.
type Event struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"` // health, ejection
	ProviderID string    `json:"provider_id,omitempty"`
	Source     string    `json:"source,omitempty"`
	Evidence   string    `json:"evidence_health,omitempty"`
	Decision   string    `json:"decision,omitempty"`
	From       string    `json:"from_health,omitempty"`
	To         string    `json:"to_health,omitempty"`
	// Until is when an ejected provider returns to selection.
	Until *time.Time `json:"until,omitempty"`
}

// eventLog keeps the last events.
type EventLog struct {
	mu     sync.Mutex // guards the following fields
	events []Event
	next   int
	full   bool
}

const eventLogSize = 64

func NewEventLog() *EventLog { return &EventLog{events: make([]Event, eventLogSize)} }

func (l *EventLog) Add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events[l.next] = e
	l.next = (l.next + 1) % eventLogSize
	l.full = l.full || l.next == 0
}

// Recent returns the events, newest first.
func (l *EventLog) Recent() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	if l.full {
		n = eventLogSize
	}
	out := make([]Event, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, l.events[(l.next-i+eventLogSize)%eventLogSize])
	}
	return out
}
