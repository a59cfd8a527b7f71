package streamgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"sync/atomic"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
)

// outKind is how an attempt ended.
type outKind int

const (
	outSuccess    outKind = iota // the terminal was written
	outCancelled                 // the client went away
	outStall                     // response_stalled terminal from the node
	outUpstream                  // the upstream answered an error
	outTransport                 // the node link failed or went silent
	outAbnormal                  // the stream ended abnormally (cut, malformed)
	outFiltered                  // the semantic filter blocked the output
	outShutdown                  // the gateway's drain deadline passed
	outFirstToken                // no output within the first-token timeout
	outDiverged                  // a splice's regeneration differed from the text the client has
)

func (k outKind) String() string {
	return [...]string{"success", "cancelled", "stall", "upstream_error", "transport", "abnormal_end", "filtered", "shutdown",
		"first_token_timeout", "resume_diverged"}[k]
}

// outCause refines a transport failure.
type outCause int

const (
	causeNone     outCause = iota
	causeBackstop          // the edge ended a silent attempt past its stall timeout
	causeDispatch          // the node did not open the dispatched attempt
	causeGone              // the provider is not (or no longer) on its node
)

func (c outCause) String() string {
	return [...]string{"none", "backstop", "dispatch", "provider_gone"}[c]
}

// outcome is an attempt's end, with what the next decision needs.
type outcome struct {
	kind       outKind
	providerID string
	path       string
	// stall handoff
	confirmed bool // recovery_handoff=confirmed
	fenceSeen bool // the node's fence metadata was present
	health    execution.HealthStatus
	// upstream answer
	upstream *execution.UpstreamError
	// tunnel: the upstream's error response, to pass through verbatim
	errHead http.Header
	errBody []byte
	// why a transport failure happened, when it matters
	cause outCause
	// the attempt wrote output to the client before it ended
	producedOutput bool
	// err is the error that ended the attempt, if one did (a failed
	// write to the client, the node link's receive error)
	err error
}

// clientGone is the outcome of a failed write to the client: it left, or
// stopped reading and was cut off after the write timeout.
func clientGone(err error) *outcome { return &outcome{kind: outCancelled, err: err} }

// slowClient reports whether o is a client cut off for not reading.
func (o outcome) slowClient() bool { return errors.Is(o.err, os.ErrDeadlineExceeded) }

// attemptRun is the per-attempt state of pump.
type attemptRun struct {
	rt       *runtime
	att      Attempt
	enc      encoder
	tun      *tunnelState
	silent   atomic.Bool
	drained  atomic.Bool
	late     atomic.Bool        // the first-token timeout fired
	produced bool               // output of this attempt reached the client
	batch    Batched            // the attempt, when it reports items held behind the current one
	unforced bool               // output written and not flushed yet (an item was held behind it)
	rendered eventstream.Output // generated output rendered (normalized path)
	hold     Timer
	first    Timer          // the first-token timer; nil once output came
	backstop Timer          // the edge's backstop on a silent attempt
	unwatch  [2]func() bool // stop watching the client and the drain (arm)
}

// pump streams one attempt to the client until it ends.
func (rt *runtime) pump(ctx context.Context, att Attempt) *outcome {
	ar := &attemptRun{rt: rt, att: att}
	ar.batch, _ = att.(Batched)
	switch {
	case rt.rs.active && att.Kind() == KindEvents && rt.cur != nil && rt.cur.enc != nil:
		ar.enc = rt.cur.enc // the continuation goes into the same stream
	case att.Kind() == KindEvents:
		ar.enc = newEncoder(rt.req, att.Model())
		if rt.req.Stream {
			rt.resp.setHead(http.StatusOK, rt.head(ar.enc.ContentType()))
		}
	default:
		ar.tun = newTunnelState(rt.req.Surface)
		if n, ok := att.(NativeAttempt); rt.req.Reshape != nil && !(ok && n.Native()) {
			ar.tun.reshape = rt.req.Reshape
		}
	}
	rt.cur = ar
	ar.arm(ctx)
	defer ar.disarm()
	for {
		it, err := att.Recv()
		if err != nil {
			return ar.broken(ctx, err)
		}
		ar.backstop.Reset(att.StallTimeout() + rt.cfg.BackstopMargin)
		if out := ar.item(it); out != nil {
			return out
		}
		if ar.unforced {
			if out := ar.settle(); out != nil {
				return out
			}
		}
	}
}

// settle flushes output written unflushed once no item is held behind
// the last one.
func (ar *attemptRun) settle() *outcome {
	if ar.batch.More() {
		return nil
	}
	ar.unforced = false
	if err := ar.rt.resp.flush(); err != nil {
		return clientGone(err)
	}
	return nil
}

// arm starts the attempt's watchers, each of which closes the attempt:
// the edge's backstop on a silent attempt, the client leaving (which
// cancels the attempt on its node), the gateway's drain deadline and the
// first-token timeout. disarm stops them, in the reverse order. They live
// in the attempt's state, not in pump's frame, which is under every held
// stream's wait (a shallow stack stays small).
func (ar *attemptRun) arm(ctx context.Context) {
	rt, att := ar.rt, ar.att
	ar.backstop = rt.cfg.Clock.AfterFunc(att.StallTimeout()+rt.cfg.BackstopMargin, func() {
		ar.silent.Store(true)
		ar.closeAttempt()
	})
	ar.unwatch[0] = context.AfterFunc(ctx, ar.closeAttempt)
	if d := rt.cfg.Drain; d != nil {
		ar.unwatch[1] = context.AfterFunc(d, func() { ar.drained.Store(true); ar.closeAttempt() })
	}
	if d := rt.policy(att.Model()).FirstTokenTimeout; d > 0 && rt.resp.State() == TransportUncommitted {
		ar.first = rt.cfg.Clock.AfterFunc(d, func() { ar.late.Store(true); ar.closeAttempt() })
	}
}

// closeAttempt closes the attempt from a watcher's goroutine (see
// recoverIn).
func (ar *attemptRun) closeAttempt() {
	defer ar.rt.recoverIn("closing the attempt")
	ar.att.Close()
}

// disarm stops what arm started and the commit hold.
func (ar *attemptRun) disarm() {
	ar.output() // the first-token timer
	ar.stopHold()
	for i := len(ar.unwatch) - 1; i >= 0; i-- {
		if stop := ar.unwatch[i]; stop != nil {
			stop()
		}
	}
	ar.backstop.Stop()
}

// item handles one item of the attempt and returns the attempt's outcome
// when it ended the attempt.
func (ar *attemptRun) item(it Item) *outcome {
	var out *outcome
	if it.Event != nil {
		out = ar.event(it.Event)
	} else if it.Frame != nil {
		out = ar.frame(it.Frame)
	}
	if out != nil {
		out.providerID, out.path, out.producedOutput = ar.att.ProviderID(), pathOf(ar.att.Kind()), ar.produced
		if out.kind != outSuccess {
			ar.stopHold()
			ar.rt.resp.discardHeld()
		}
	}
	return out
}

// recoverIn, deferred on a goroutine the request owns but no handler
// recover covers (timer and context callbacks), fails the response if
// it panics in what (the attempt ends on its next write or read) and
// logs it, instead of ending the process.
func (rt *runtime) recoverIn(what string) {
	if v := recover(); v != nil {
		rt.resp.fail(fmt.Errorf("%s: panic", what))
		rt.cfg.Log.Error("request goroutine panicked; the request ends with a typed error", "in", what,
			"panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
	}
}

// broken is the outcome of a Recv error: the client left, the edge
// backstop fired, or the node link failed.
func (ar *attemptRun) broken(ctx context.Context, err error) *outcome {
	if ctx.Err() == nil {
		if o := ar.endedBeforeLoss(); o != nil {
			return o
		}
	}
	ar.stopHold()
	ar.rt.resp.discardHeld()
	o := &outcome{providerID: ar.att.ProviderID(), path: pathOf(ar.att.Kind()), producedOutput: ar.produced, err: err}
	switch {
	case ctx.Err() != nil:
		o.kind = outCancelled
	case ar.drained.Load():
		o.kind = outShutdown
	case ar.late.Load():
		o.kind = outFirstToken
	case errors.Is(err, io.EOF):
		o.kind = outAbnormal
	case ar.silent.Load():
		o.kind, o.cause = outTransport, causeBackstop
	default:
		o.kind = outTransport
	}
	return o
}

// out sends rendered bytes to the client, through the commit hold when
// one is configured and the response is not committed yet.
func (ar *attemptRun) out(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	rt := ar.rt
	h := rt.cfg.Hold
	if !h.enabled() || rt.resp.State() != TransportUncommitted {
		if ar.batch != nil && ar.batch.More() {
			ar.unforced = true
			return rt.resp.writeUnflushed(p)
		}
		ar.unforced = false // this write's flush sends all
		return rt.resp.write(p)
	}
	rt.resp.hold(p)
	if h.MaxEvents > 0 && rt.resp.heldEvents() >= h.MaxEvents {
		ar.stopHold()
		return rt.resp.release()
	}
	if ar.hold == nil && h.MaxDelay > 0 {
		ar.hold = rt.cfg.Clock.AfterFunc(h.MaxDelay, rt.resp.releaseFromTimer)
	}
	return nil
}

// output marks the attempt's first output: the first-token timer stops.
func (ar *attemptRun) output() {
	if ar.first != nil {
		ar.first.Stop()
		ar.first = nil
	}
}

func (ar *attemptRun) stopHold() {
	if ar.hold != nil {
		ar.hold.Stop()
		ar.hold = nil
	}
}

// finishOut releases held output and writes the last bytes.
func (ar *attemptRun) finishOut(p []byte) error {
	ar.stopHold()
	if err := ar.rt.resp.release(); err != nil {
		return err
	}
	return ar.rt.resp.write(p)
}

// event handles one normalized event; non-nil when the attempt ended.
func (ar *attemptRun) event(p *execution.RunEvent) *outcome {
	ev := *p // the encoder may change its copy
	rt := ar.rt
	if rt.rs.active {
		if keep, stop := rt.continuation(&ev); stop != nil {
			return stop
		} else if !keep {
			return nil
		}
	}
	if rt.req.AskedModelName {
		ev.Model = "" // the encoder keeps the name the client asked for
	}
	if ev.Usage != nil {
		rt.sum.Usage = ev.Usage
	}
	switch ev.Type {
	case execution.EventTypeDelta, execution.EventTypeMessage:
		ar.output()
		if len(ev.ToolCalls) > 0 {
			rt.sawToolCall = true
		}
		if rt.cfg.Filter.enabled() {
			var blocked bool
			if ev, blocked = rt.cfg.Filter.apply(ev); blocked {
				return &outcome{kind: outFiltered}
			}
		}
		if err := ar.out(ar.enc.Event(ev)); err != nil {
			return clientGone(err)
		}
		ar.rendered.Add(eventOutput(ev))
		if ev.HasContent() {
			ar.produced = true
			if rt.req.Continue != nil { // only a resumable request keeps the text it delivered
				rt.rs.delivered(ev)
			}
		}
	case execution.EventTypeStart, execution.EventTypeUsage:
		ar.enc.Event(ev)
	case execution.EventTypeComplete:
		ar.output()
		return ar.complete(ev)
	case execution.EventTypeError, execution.EventTypeCancelled:
		return failureOutcome(ev.Failure)
	}
	return nil
}

// complete writes the successful end of a normalized attempt.
func (ar *attemptRun) complete(ev execution.RunEvent) *outcome {
	rt := ar.rt
	var err error
	if rt.req.Stream {
		err = ar.finishOut(ar.enc.Event(ev))
	} else {
		err = rt.resp.respond(http.StatusOK, rt.head(ar.enc.ContentType()), ar.enc.Body(ev))
	}
	if err != nil {
		return clientGone(err)
	}
	rt.resp.terminal()
	return &outcome{kind: outSuccess}
}

// failureOutcome classifies a typed failure from an error event or frame.
func failureOutcome(f *execution.ExecutionFailure) *outcome {
	if f == nil {
		return &outcome{kind: outAbnormal}
	}
	switch f.Code {
	case execution.FailureCodeResponseStalled:
		ev := f.Stall
		if ev == nil {
			ev = &execution.StallEvidence{}
		}
		return &outcome{kind: outStall, confirmed: ev.HandoffConfirmed, fenceSeen: ev.Fence != "",
			health: execution.NormalizeHealthStatus(string(ev.Health))}
	case execution.FailureCodeUpstreamError:
		if f.Upstream != nil && f.Upstream.Status >= 400 {
			return &outcome{kind: outUpstream, upstream: f.Upstream}
		}
		return &outcome{kind: outAbnormal, upstream: f.Upstream}
	case execution.FailureCodeProviderNotFound, execution.FailureCodeProviderUnavailable:
		return &outcome{kind: outTransport, cause: causeGone}
	}
	return &outcome{kind: outAbnormal}
}
