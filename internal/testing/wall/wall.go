// Package wall is the fake-provider "wall" of RELIABILITY.md: one HTTP
// handler that speaks OpenAI Chat (JSON and SSE), the Responses API event
// stream, and Ollama's native API (NDJSON), and misbehaves on demand. The
// model name selects the fault (see Faults). Every attempt is recorded —
// when it started, whether the wall saw the client cancel or close, how
// many bytes it sent — so tests can assert the provider's view.
//
// It is test support: serve it with httptest (TCP) or over a bufconn
// listener.
package wall

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Attempt is one request the wall received.
type Attempt struct {
	Path      string
	Model     string
	Fault     string
	Start     time.Time
	Header    http.Header
	Body      []byte
	sentBytes atomic.Int64
	cancelled atomic.Bool
	done      chan struct{}
	endedAt   atomic.Int64
}

// SentBytes is how many body bytes the wall wrote.
func (a *Attempt) SentBytes() int64 { return a.sentBytes.Load() }

// Cancelled reports whether the wall saw the request context end (client
// cancel or connection close) before it finished answering.
func (a *Attempt) Cancelled() bool { return a.cancelled.Load() }

// Done is closed when the handler returned.
func (a *Attempt) Done() <-chan struct{} { return a.done }

// EndedAt is when the handler returned (zero while running).
func (a *Attempt) EndedAt() time.Time {
	n := a.endedAt.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Wall is the fake provider. Configure the public fields before serving.
type Wall struct {
	// Tokens is the canonical answer, one token per event.
	Tokens []string
	// TokenDelay is the delay between tokens for normal streams.
	TokenDelay time.Duration
	// Models are listed by /v1/models and /api/tags; unknown models still
	// answer (the model name is the fault selector).
	Models []string
	// Fault, when set, applies to every request whatever its model, so two
	// walls can serve the same model differently. Set it before serving;
	// SetFault changes it while serving.
	Fault string
	fault atomic.Pointer[string]

	mu       sync.Mutex // guards the following fields
	attempts []*Attempt
	perModel map[string]int
}

// New returns a wall with the canonical answer "Hello world from the wall".
func New() *Wall {
	return &Wall{
		Tokens:   []string{"Hello", " world", " from", " the", " wall", "."},
		Models:   []string{"ok"},
		perModel: map[string]int{},
	}
}

// Text is the canonical answer text.
func (w *Wall) Text() string { return strings.Join(w.Tokens, "") }

// Attempts returns every attempt so far.
func (w *Wall) Attempts() []*Attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*Attempt(nil), w.attempts...)
}

// AttemptsFor returns the attempts for model.
func (w *Wall) AttemptsFor(model string) []*Attempt {
	var out []*Attempt
	for _, a := range w.Attempts() {
		if a.Model == model {
			out = append(out, a)
		}
	}
	return out
}

// record registers an attempt and returns its ordinal for the model (1 for
// the first).
func (w *Wall) record(a *Attempt) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attempts = append(w.attempts, a)
	w.perModel[a.Model]++
	return w.perModel[a.Model]
}

// fault is a parsed model name: a fault name and an optional argument,
// e.g. "stall-after-3", "slow-ttft-200ms", "drip-50ms".
type fault struct {
	name string
	n    int
	d    time.Duration
}

// parseFault splits a model name into the fault and its argument.
func parseFault(model string) fault {
	f := fault{name: model}
	if fixedFaults[model] {
		return f
	}
	if i := strings.LastIndexByte(model, '-'); i > 0 {
		arg := model[i+1:]
		if n, err := strconv.Atoi(arg); err == nil {
			f.name, f.n = model[:i], n
		} else if d, err := time.ParseDuration(arg); err == nil {
			f.name, f.d = model[:i], d
		}
	}
	return f
}

// fixedFaults are fault names that end in a number but take no argument.
var fixedFaults = map[string]bool{
	"ctx-length-400": true, "content-filter-400": true, "html-502": true,
	"429-retry-after": true, "429-bare": true, "500-once": true, "503-persist": true,
}

// SetFault changes the fault applied to every request ("" for none) while
// the wall is serving.
func (w *Wall) SetFault(f string) { w.fault.Store(&f) }

func (w *Wall) currentFault() string {
	if f := w.fault.Load(); f != nil {
		return *f
	}
	return w.Fault
}
