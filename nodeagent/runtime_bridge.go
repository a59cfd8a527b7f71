package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/syncx"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
	"github.com/iopgw/iop/wire"
)

// Bridge runs the work the edge dispatches: it sits between the wire
// boundary and the provider registry, admits attempts, starts one watchdog
// per attempt, and maps events and frames back to the wire. It is safe for
// concurrent use; each attempt runs on the caller's goroutine.
type Bridge struct {
	registry   *execution.Registry
	probes     *ProbeCoordinator
	observer   StallObserver
	log        *slog.Logger
	closeGrace time.Duration
	tracer     trace.Tracer
	traced     bool // the tracer records spans: an attempt reads the request's trace context
	clock      clock.Clock

	providers sync.WaitGroup // provider goroutines, which may outlive an unconfirmed fence
	// workers run the providers of attempts over the network
	// (goProvider) and, in process, the ends of handed-over reads with
	// the stream's next work (withHandover).
	workers *syncx.Workers

	mu       sync.Mutex               // guards the following fields
	runs     map[string]*attemptState // each run's admitted attempts
	inFlight map[string]*atomic.Int32
}

// BridgeConfig configures a Bridge.
type BridgeConfig struct {
	Registry   *execution.Registry
	Probes     *ProbeCoordinator // nil: a default coordinator (5 s)
	Observer   StallObserver     // nil: no stall observations
	Log        *slog.Logger      // nil: discard
	CloseGrace time.Duration     // zero: DefaultCloseGrace
	Tracer     trace.Tracer      // nil: no spans
	// Clock runs the bridge's timers — the watchdogs', the held items' age
	// and the probes' bound (nil: the wall clock).
	Clock clock.Clock
}

// NewBridge returns a Bridge.
func NewBridge(c BridgeConfig) *Bridge {
	b := &Bridge{
		registry: c.Registry, probes: c.Probes, observer: c.Observer, log: c.Log, closeGrace: c.CloseGrace, tracer: c.Tracer,
		clock:   clock.Or(c.Clock),
		workers: syncx.NewWorkers(maxIdleWorkers),
		runs:    map[string]*attemptState{}, inFlight: map[string]*atomic.Int32{},
	}
	if b.probes == nil {
		b.probes = &ProbeCoordinator{}
	}
	if b.probes.Clock == nil {
		b.probes.Clock = b.clock
	}
	if b.tracer == nil {
		b.tracer = noop.NewTracerProvider().Tracer("iop")
	}
	b.traced = c.Tracer != nil
	if t, ok := c.Tracer.(interface{ Enabled() bool }); ok {
		b.traced = t.Enabled()
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.closeGrace <= 0 {
		b.closeGrace = DefaultCloseGrace
	}
	for _, d := range c.Registry.Descriptors() {
		b.inFlight[d.ProviderID] = new(atomic.Int32)
	}
	return b
}

// InFlight returns the number of admitted attempts per provider.
func (b *Bridge) InFlight() map[string]int32 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int32, len(b.inFlight))
	for id, n := range b.inFlight {
		out[id] = n.Load()
	}
	return out
}

// CancelRun cancels every attempt of runID. An empty run_id is rejected:
// cancellation targets a non-empty run_id only. It reports how many
// attempts were cancelled.
func (b *Bridge) CancelRun(runID string) (int, error) {
	if err := execution.ValidateRunID(runID); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for a := b.runs[runID]; a != nil; a = a.next {
		a.cancel()
		n++
	}
	return n, nil
}

// Wait waits for every provider goroutine and every health probe to
// return, up to ctx; then the goroutines kept for providers end.
func (b *Bridge) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.providers.Wait(); b.probes.running.Wait(); b.workers.Close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run executes a normalized RunRequest from the wire and sends its events
// with send until exactly one terminal. sess is the transport session the
// request came on; nil marks an unbound path (no health_observation_seq).
func (b *Bridge) Run(ctx context.Context, sess *Session, m *wire.RunRequest, send func(*wire.AttemptUp) error) {
	b.startRun(ctx, sess, m, send, nil).background(&b.providers).wait(ctx)
}

// startRun starts Run's attempt and returns at once; ended (if not nil)
// is called right after its terminal was sent.
func (b *Bridge) startRun(ctx context.Context, sess *Session, m *wire.RunRequest, send func(*wire.AttemptUp) error, ended func()) started {
	req, err := runRequestFromProto(m)
	if err != nil {
		return refused(send, ended, eventMsg(runEventToProto(errorEvent(err), attemptIdentity{})))
	}
	p, desc, err := b.registry.Lookup(req.ProviderID)
	if err != nil {
		return refused(send, ended, eventMsg(runEventToProto(errorEvent(err), attemptIdentity{})))
	}
	id := attemptIdentity{RunID: req.RunID, AttemptID: req.AttemptID, Adapter: desc.Adapter, Target: req.Model}
	ctx, span := b.startSpan(ctx, req.Header, desc, req.Model, execution.ExecutionPathNormalized)
	if b.traced { // off, ctx holds no span: nothing to inject
		req.Header = tracing.Inject(ctx, req.Header)
	}
	out := &outbound{log: b.log, providerID: desc.ProviderID, span: span, sendMsg: send, clock: b.clock, ended: ended}
	out.co.whole = !m.GetStream() // the edge renders one JSON answer at the end
	em := execution.NewEmitter(func(ev execution.RunEvent) {
		ev.Failure = out.observe(execution.ClassifyRuntimeEvent(ev), ev.Failure)
		for _, part := range splitEvent(ev, maxEventText) {
			out.event(runEventToProto(part, id))
		}
	})
	spec := attemptSpec[execution.RunEvent]{
		path: execution.ExecutionPathNormalized, id: id, desc: desc, provider: p, sess: sess,
		timeout: time.Duration(req.ResponseStallTimeoutMS) * time.Millisecond, sink: em,
		exec:     func(ctx context.Context) error { return p.Execute(httpx.WithReadHook(ctx, out.beforeRead), req, em) },
		terminal: runTerminal,
		stalled: func(v stallVerdict) execution.RunEvent {
			return execution.RunEvent{Type: execution.EventTypeError, Error: v.errorText(), Failure: v.failure()}
		},
		cancelled: execution.RunEvent{Type: execution.EventTypeCancelled, Error: "cancelled"},
	}
	spec.span = span
	out.w = newWatchdog(spec.timeout, b.closeGrace, b.clock)
	return startAttempt(ctx, b, spec, out.w)
}

// Tunnel executes a ProviderTunnelRequest from the wire and sends its
// frames with send until exactly one terminal.
func (b *Bridge) Tunnel(ctx context.Context, sess *Session, m *wire.ProviderTunnelRequest, send func(*wire.AttemptUp) error) {
	b.startTunnel(ctx, sess, m, send, nil).background(&b.providers).wait(ctx)
}

// startTunnel starts Tunnel's attempt and returns at once; ended (if not
// nil) is called right after its terminal was sent.
func (b *Bridge) startTunnel(ctx context.Context, sess *Session, m *wire.ProviderTunnelRequest, send func(*wire.AttemptUp) error, ended func()) started {
	req, err := tunnelRequestFromProto(m)
	if err != nil {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(err), attemptIdentity{})))
	}
	p, desc, err := b.registry.Lookup(req.ProviderID)
	if err != nil {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(err), attemptIdentity{})))
	}
	t, ok := p.(execution.Tunneler)
	if !ok {
		return refused(send, ended, frameMsg(tunnelFrameToProto(errorFrame(execution.NewFailure(execution.FailureCodeUnsupported, "provider does not tunnel")), attemptIdentity{})))
	}
	id := attemptIdentity{RunID: req.RunID, AttemptID: req.AttemptID, Adapter: desc.Adapter, Target: req.Model}
	ctx, span := b.startSpan(ctx, req.Header, desc, req.Model, execution.ExecutionPathProviderTunnel)
	if b.traced { // off, ctx holds no span: nothing to inject
		req.Header = tracing.Inject(ctx, req.Header)
	}
	return b.frames(ctx, sess, id, desc, p, req.ResponseStallTimeoutMS, send, ended, span, func(ctx context.Context, em *execution.FrameEmitter) error {
		return t.Tunnel(ctx, req, em)
	})
}

// frames starts a frame-producing attempt (tunnel or ollama_api); span,
// if not nil, ends with the attempt.
func (b *Bridge) frames(ctx context.Context, sess *Session, id attemptIdentity, desc execution.ProviderDescriptor, p execution.Provider,
	timeoutMS int64, send func(*wire.AttemptUp) error, ended func(), span trace.Span, exec func(context.Context, *execution.FrameEmitter) error) started {
	events := span // what the attempt's events go on: its own span, else ctx's
	if events == nil {
		events = trace.SpanFromContext(ctx)
	}
	out := &outbound{log: b.log, providerID: desc.ProviderID, span: events, sendMsg: send, clock: b.clock, ended: ended}
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
		f.Failure = out.observe(execution.ClassifyProviderTunnelFrame(f), f.Failure)
		if f.Type == execution.FrameTypeBody {
			// The edge owns what it receives, and on the in-process channel
			// gives it back once written (edgeAttempt.Recv); the provider's
			// own bytes stay the provider's.
			f.Body = eventstream.Chunk(f.Body)
		}
		out.frame(tunnelFrameToProto(f, id))
	})
	spec := attemptSpec[execution.ProviderTunnelFrame]{
		path: execution.ExecutionPathProviderTunnel, id: id, desc: desc, provider: p, sess: sess,
		timeout: time.Duration(timeoutMS) * time.Millisecond, sink: em,
		exec: func(ctx context.Context) error {
			pump := &httpx.Pump{BeforeRead: out.beforeRead, CopiesBodies: true}
			if ho := handoverOf(ctx); ho != nil {
				pump.Hand = func(step func() bool, tail func(bool) error, abort func()) bool {
					return out.hand(ctx, ho, step, tail, abort, func(v any) error { return panicFailure(b.log, desc.ProviderID, v) })
				}
			}
			return exec(httpx.WithPump(ctx, pump), em)
		},
		terminal: frameTerminal,
		stalled: func(v stallVerdict) execution.ProviderTunnelFrame {
			return execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: v.errorText(), Failure: v.failure()}
		},
		cancelled: execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "cancelled"},
		span:      span,
	}
	out.w = newWatchdog(spec.timeout, b.closeGrace, b.clock)
	return startAttempt(ctx, b, spec, out.w)
}

// outbound is what an attempt's emitter does with each item, for both
// kinds: progress resets the watchdog, a stall failure is kept only when
// the watchdog claimed it, and items go to the edge — coalesced where
// the edge's handling allows (see coalescer) — until the first send
// error, which is logged once (the edge has given up on the attempt).
type outbound struct {
	w          *watchdog // set before the provider runs
	log        *slog.Logger
	providerID string
	span       trace.Span // the node's span of the attempt
	sendMsg    func(*wire.AttemptUp) error
	clock      clock.Clock // the bridge's: the held items' age
	ended      func()      // called once the terminal was sent (nil: nothing to call)

	mu      sync.Mutex // the provider's read hook and the age timer run outside the emitter's lock
	co      coalescer
	aged    clock.Timer // sends what is held once its oldest item is maxHeldAge old; made once
	armed   bool        // aged is pending: it fires by the held items' age bound, or earlier
	lending bool        // the provider's reads are handed to the edge (hand): the age timer rests
	sendErr error
}

// event sends (or holds) one normalized event.
func (o *outbound) event(m *wire.RunEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.co.holdEvent(m)
	o.added(o.co.add(o.clock.Now(), o.co.heldEvent(m), len(m.GetDelta())+len(m.GetReasoning())+len(m.GetMessage())+len(m.GetToolCalls())))
	o.terminal(execution.EventType(m.GetType()).IsTerminal())
}

// frame sends (or holds) one tunnel frame.
func (o *outbound) frame(m *wire.ProviderTunnelFrame) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.co.holdFrame(m)
	o.added(o.co.add(o.clock.Now(), o.co.heldFrame(m), len(m.GetBody())))
	o.terminal(execution.FrameType(m.GetType()).IsTerminal())
}

// terminal calls ended after the terminal item went out (under o.mu:
// nothing is sent after it).
func (o *outbound) terminal(is bool) {
	if !is {
		return
	}
	if o.armed {
		o.aged.Stop()
		o.armed = false
	}
	if o.ended != nil {
		o.ended()
	}
}

// added sends what is held when it must go now; otherwise it makes sure
// the held items leave by their age bound, whether or not another item
// or read follows: a held item is progress the node's watchdog already
// counted, and the edge must see it long before its own backstop (a
// provider's stall timeout plus a margin of seconds) could fire. The
// timer is lazy: a flush leaves it pending, and its firing sends only
// what has reached the bound (re-arming for the rest), so a stream whose
// reads flush its items touches the timer about once per maxHeldAge
// instead of twice per item. Under o.mu.
func (o *outbound) added(now bool) {
	if now {
		o.flush()
		return
	}
	if o.armed || o.lending {
		return // pending for an older hold (it fires no later than this one's bound), or lent reads send it
	}
	o.arm(maxHeldAge - clock.Since(o.clock, o.co.oldest))
}

// arm sets the age timer to fire in d (under o.mu).
func (o *outbound) arm(d time.Duration) {
	if o.aged == nil {
		o.aged = o.clock.AfterFunc(d, o.ageOut)
	} else {
		o.aged.Reset(d)
	}
	o.armed = true
}

// ageOut is the age timer: what is held goes out once it reached the
// age bound; a younger hold (the one the timer was set for went out
// since) re-arms it for the rest of its bound, and nothing held lets it
// rest until the next hold.
func (o *outbound) ageOut() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed = false
	if o.lending || len(o.co.events)+len(o.co.frames) == 0 {
		return
	}
	if rest := maxHeldAge - clock.Since(o.clock, o.co.oldest); rest > 0 {
		o.arm(rest)
		return
	}
	o.flush()
}

// beforeRead is the provider's read hook: what its last read produced
// goes out before it waits on the upstream again.
func (o *outbound) beforeRead() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.co.beforeRead() {
		o.flush()
	}
}

// flush sends what is held as one message (under o.mu).
func (o *outbound) flush() {
	if m := o.co.take(); m != nil {
		o.send(func() error { return o.sendMsg(m) })
	}
}

func eventMsg(ev *wire.RunEvent) *wire.AttemptUp {
	return &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: ev}}
}

func frameMsg(f *wire.ProviderTunnelFrame) *wire.AttemptUp {
	return &wire.AttemptUp{Msg: &wire.AttemptUp_Frame{Frame: f}}
}

// observe feeds the watchdog and returns the failure to send.
func (o *outbound) observe(d execution.Disposition, f *execution.ExecutionFailure) *execution.ExecutionFailure {
	if d == execution.DispositionProgress {
		o.w.touch()
	}
	if f != nil && f.Code == execution.FailureCodeResponseStalled && !o.w.claimed.Load() {
		return nil // only the watchdog types a stall
	}
	if f != nil {
		o.span.SetStatus(codes.Error, string(f.Code))
	}
	return f
}

// send runs f unless an earlier send failed.
func (o *outbound) send(f func() error) {
	if o.sendErr != nil {
		return
	}
	if o.sendErr = f(); o.sendErr != nil {
		o.log.Debug("the edge no longer takes this attempt's output; the rest is dropped", "provider_id", o.providerID,
			"error", o.sendErr.Error())
	}
}

// attemptSpec describes one attempt of either kind.
type attemptSpec[E any] struct {
	path      execution.ExecutionPath
	id        attemptIdentity
	desc      execution.ProviderDescriptor
	provider  execution.Provider
	sess      *Session
	timeout   time.Duration
	sink      terminalSink[E]
	exec      func(ctx context.Context) error
	terminal  func(err error) E // the terminal for a provider that returned without one
	stalled   func(v stallVerdict) E
	cancelled E
	span      trace.Span // ended after the attempt's end; nil: none
}

// execSafely runs a provider's attempt; a panic in it ends that attempt
// with an internal failure instead of the node process. The panic value is
// not logged (it may hold request data); its type and stack are.
func execSafely(ctx context.Context, exec func(context.Context) error, log *slog.Logger, providerID string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicFailure(log, providerID, v)
		}
	}()
	return exec(ctx)
}

// panicFailure logs a provider's panic and is the attempt's error for it.
func panicFailure(log *slog.Logger, providerID string, v any) error {
	log.Error("provider panicked; the attempt ends with an internal error", "provider_id", providerID,
		"panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
	return execution.NewFailure(execution.FailureCodeInternal, "the provider failed unexpectedly")
}

func runTerminal(err error) execution.RunEvent {
	if err == nil {
		err = errors.New("provider ended without a terminal event")
	}
	return errorEvent(err)
}

func frameTerminal(err error) execution.ProviderTunnelFrame {
	if err == nil {
		err = errors.New("provider ended without a terminal frame")
	}
	return errorFrame(err)
}

// errorEvent turns err into an error terminal; the failure code survives,
// and only response_stalled failures ever cross the wire typed.
func errorEvent(err error) execution.RunEvent {
	return execution.RunEvent{Type: execution.EventTypeError, Error: err.Error(), Failure: asFailure(err)}
}

func errorFrame(err error) execution.ProviderTunnelFrame {
	return execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: err.Error(), Failure: asFailure(err)}
}

func asFailure(err error) *execution.ExecutionFailure {
	var f *execution.ExecutionFailure
	if errors.As(err, &f) {
		return f
	}
	return nil
}

// logUpstreamFailure logs an attempt that failed on its upstream's side
// with the cause class (refused, dns, tls, timeout, reset, …) and the
// transport's error (never the request or a credential; the URL is not
// in it).
func logUpstreamFailure(log *slog.Logger, providerID string, err error) {
	if err == nil {
		return // before f, which errors.As moves to the heap
	}
	var f *execution.ExecutionFailure
	if !errors.As(err, &f) || f.Upstream == nil {
		return
	}
	cause, detail := strings.TrimPrefix(f.Upstream.Code, "upstream_"), f.Message
	if f.Upstream.Status != 0 {
		cause = "status"
	}
	if f.Err != nil && f.Err != error(f.Upstream) {
		detail = f.Err.Error()
	}
	log.Warn("upstream failed", slog.String("provider_id", providerID), slog.String("cause", cause),
		slog.Int("status", f.Upstream.Status), slog.String("error", detail))
}

// startSpan opens the node's span of an attempt, the child of the edge's
// attempt span when the request carries its trace context.
func (b *Bridge) startSpan(ctx context.Context, h map[string][]string, desc execution.ProviderDescriptor, model string,
	path execution.ExecutionPath) (context.Context, trace.Span) {
	if !b.traced {
		return ctx, tracing.NoSpan // no span: the request's trace context is not even read
	}
	return b.tracer.Start(tracing.Extract(ctx, h), "iop node attempt", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("iop.provider", desc.ProviderID), attribute.String("iop.adapter", desc.Adapter),
			attribute.String("iop.model", model), attribute.String("iop.path", string(path))))
}

// maxIdleWorkers bounds the goroutines kept for providers between
// attempts: enough for the attempts that start while others end at a
// few hundred concurrent streams; each keeps a stack of a few KiB.
const maxIdleWorkers = 64

// goProvider runs an attempt's provider on a goroutine kept from an
// earlier attempt when one waits (its stack already as deep as a round
// trip needs), counted in b.providers until it returns.
func (b *Bridge) goProvider(f func()) {
	b.providers.Add(1)
	b.workers.Go(func() {
		defer b.providers.Done()
		f()
	})
}
