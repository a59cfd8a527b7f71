package streamgate

import (
	"context"
	"errors"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
)

// Kind says what an attempt produces.
type Kind int

// The attempt kinds.
const (
	// KindEvents: normalized runtime events, rendered by the adapter.
	KindEvents Kind = iota
	// KindFrames: tunnel frames whose bytes go to the client unchanged.
	KindFrames
)

// Item is one thing an attempt produced: an event or a frame.
type Item struct {
	Event *execution.RunEvent
	Frame *execution.ProviderTunnelFrame
}

// Batched is an Attempt that can say it already holds its next item
// (the node sent several in one message): the client's bytes of the
// current item are then written without a flush, and the last item held
// flushes them all in one write. A burst read upstream at once reaches
// the client at once, in as few writes as its size needs.
type Batched interface {
	More() bool
}

// Attempt is one dispatched attempt: a leased provider working on the
// request. Recv and Close may be called from different goroutines; Recv
// from one goroutine at a time.
type Attempt interface {
	Kind() Kind
	// ProviderID is the edge-owned identity of the leased provider.
	ProviderID() string
	// Model is the model the attempt runs (a fallback may differ from the
	// request's).
	Model() string
	// StallTimeout is the provider's effective stall timeout.
	StallTimeout() time.Duration
	// Recv returns the next item. After a terminal item it returns
	// io.EOF. A transport failure (node lost) is an error. A frame (the
	// struct and its Body) is the attempt's again at the next Recv, which
	// may reuse it: the runtime writes the body or copies what it keeps
	// of the frame before asking for more.
	Recv() (Item, error)
	// Close ends the attempt: an attempt without a terminal is cancelled
	// on its node; the lease is released exactly once. Idempotent.
	Close()
}

// NativeAttempt is implemented by attempts that can say whether they run
// the request's Native form (the upstream's own API, e.g. Ollama's)
// rather than its Tunnel form.
type NativeAttempt interface {
	Native() bool
}

// Need is what the dispatched provider must support.
type Need int

// The needs.
const (
	NeedAny         Need = iota // events or tunnel
	NeedTunnel                  // only tunnel-capable providers (embeddings)
	NeedOllamaAware             // prefers native Ollama for /api routes
	NeedOllamaAPI               // only providers speaking Ollama's API natively (/api/show)
)

// Work is what an attempt should do; the dispatcher picks the form the
// leased provider's path takes.
type Work struct {
	// Run is the normalized request; nil when the endpoint has none.
	Run *execution.RunRequest
	// Tunnel is the OpenAI-compatible HTTP request; nil when not tunnelable.
	Tunnel *execution.ProviderTunnelRequest
	// Native is the native Ollama request, for providers that speak it.
	Native *execution.CommandRequest
	// Refuse, if set, says why Run cannot go to a provider of the given
	// adapter on the translated path: a field or content part that
	// adapter's upstream has no equivalent for (nil when it can).
	Refuse func(adapter string) *openai.Error
}

// DispatchError is a failure to start an attempt on a leased provider:
// its node did not open the attempt in time, or its connection closed. It
// is a pre-commit failure like a refused upstream connection: the request
// moves to another provider under the failover rules.
type DispatchError struct {
	ProviderID string
	Err        error
}

func (e *DispatchError) Error() string { return "dispatch failed: " + e.Err.Error() }

// Unwrap makes a DispatchError match ErrDispatchFailed and its cause.
func (e *DispatchError) Unwrap() []error { return []error{ErrDispatchFailed, e.Err} }

// RefusedError is a dispatch failure that is the client's: the request
// cannot be expressed for the provider chosen. It is answered with Err,
// never retried.
type RefusedError struct{ Err *openai.Error }

func (e *RefusedError) Error() string { return e.Err.Message }

// DispatchRequest asks for one attempt.
type DispatchRequest struct {
	Model string
	Need  Need
	Work  Work
	// AvoidProviderID asks the pool to prefer any runtime-eligible
	// alternate over this provider (selection policy only).
	AvoidProviderID string
	// AllowAvoidedProviderFallback permits the avoided provider when no
	// alternate exists and it remains runtime eligible.
	AllowAvoidedProviderFallback bool
	// Exclude are providers that already failed this request on this
	// model: none of them is selected (a set, so a model with several
	// providers is tried through and then falls back).
	Exclude []string
	// Prefill asks for a provider that continues an assistant prefill:
	// the attempt resumes a committed stream.
	Prefill bool
	// Pin, when set, is the only provider that may serve the request:
	// the one that keeps the state it names.
	Pin string
}

// Candidates describes who could serve a dispatch right now, ignoring
// capacity.
type Candidates struct {
	Alternates  int  // eligible providers other than the avoided one
	AvoidedOnly bool // the avoided provider is eligible (and alone)
}

// Dispatcher admits and starts attempts.
type Dispatcher interface {
	// Dispatch waits for admission (the pool's queue), leases a provider
	// and starts the work on it.
	Dispatch(ctx context.Context, req DispatchRequest) (Attempt, error)
	// Candidates reports who could serve req, for the replay decision.
	Candidates(req DispatchRequest) Candidates
}

// Dispatch errors the runtime distinguishes (the dispatcher wraps them).
var (
	// ErrNoProvider: nothing serves the model.
	ErrNoProvider = errors.New("no provider serves the model")
	// ErrQueueFull: the model's queue is full.
	ErrQueueFull = errors.New("queue full")
	// ErrQueueTimeout: the request waited too long for a slot.
	ErrQueueTimeout = errors.New("queue wait exceeded")
	// ErrDispatchFailed: the leased provider's node could not be reached.
	ErrDispatchFailed = errors.New("dispatch failed")
)

// Clock is the runtime's time source, and Timer its timers (the
// product's one clock, internal/clock).
type (
	Clock = clock.Clock
	Timer = clock.Timer
)

// RealClock is the wall clock.
var RealClock = clock.Real

// Handoff metadata keys the gateway sets on a validated stall terminal.
const (
	MetadataKeyProviderID      = execution.MetadataKeyProviderID
	MetadataKeyRecoveryHandoff = execution.MetadataKeyRecoveryHandoff
	RecoveryHandoffConfirmed   = execution.RecoveryHandoffConfirmed
)
