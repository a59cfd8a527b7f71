package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/ids"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

// Dispatcher implements streamgate.Dispatcher over the pool and the
// hub: an attempt is a lease on a provider and an attempt stream to its
// node.
type Dispatcher struct {
	Pool   *pool.Pool
	Hub    *Hub
	Tracer trace.Tracer
	// Aliases and Queue are one configuration generation's, for every
	// request under it (nil: the pool's own).
	Aliases func(model string) []pool.ModelTarget
	Queue   func(model string) pool.QueueConfig
}

var _ streamgate.Dispatcher = (*Dispatcher)(nil)

// Dispatch implements [streamgate.Dispatcher]. A provider whose adapter
// cannot take the request's translated form (buildDown's refusal) is
// passed over for the model's others; the refusal is the client's only
// when none of them can take it.
func (d *Dispatcher) Dispatch(ctx context.Context, req streamgate.DispatchRequest) (streamgate.Attempt, error) {
	var refused error
	for {
		l, err := d.Pool.Acquire(ctx, d.poolRequest(req))
		if err != nil {
			if refused != nil && errors.Is(err, streamgate.ErrNoProvider) {
				return nil, refused
			}
			return nil, err
		}
		attempt, err := d.open(ctx, l, req.Work)
		if !errors.As(err, new(*streamgate.RefusedError)) {
			return attempt, err
		}
		refused = err
		req.Exclude = append(req.Exclude[:len(req.Exclude):len(req.Exclude)], l.ProviderID)
	}
}

// open starts an attempt of w on the leased provider (releasing the lease
// when it cannot).
func (d *Dispatcher) open(ctx context.Context, l *pool.Lease, w streamgate.Work) (streamgate.Attempt, error) {
	attemptID := ids.New()
	ctx, span := d.startSpan(ctx, l)
	down, kind, err := buildDown(l, tracedWork(ctx, span, w), attemptID)
	if err != nil {
		span.SetStatus(codes.Error, "dispatch refused")
		span.End()
		l.Release()
		if errors.As(err, new(*streamgate.RefusedError)) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", streamgate.ErrDispatchFailed, err)
	}
	ac, err := d.Hub.Open(ctx, pool.Reception{NodeID: l.NodeID, ConnectionGeneration: l.ConnectionGeneration}, down)
	if err != nil {
		l.Release()
		span.SetStatus(codes.Error, "the node did not open the attempt")
		span.End()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d.Hub.NoteDispatchFailure()
		return nil, &streamgate.DispatchError{ProviderID: l.ProviderID, Err: err}
	}
	return &edgeAttempt{pool: d.Pool, lease: l, conn: ac, kind: kind, native: down.GetCommand() != nil, span: span}, nil
}

// startSpan opens the attempt's span, a child of the request's. With
// tracing off (a Tracer that reports itself disabled) nothing is built
// or looked up: the request's context holds no span (the edge opens
// none), and the attempt's is a no-op.
func (d *Dispatcher) startSpan(ctx context.Context, l *pool.Lease) (context.Context, trace.Span) {
	if t, ok := d.Tracer.(interface{ Enabled() bool }); ok && !t.Enabled() {
		return ctx, tracing.NoSpan
	}
	return d.Tracer.Start(ctx, "iop attempt", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("iop.provider", l.ProviderID), attribute.String("iop.node", l.NodeID),
		attribute.String("iop.model", l.Model), attribute.String("iop.target", l.Target)))
}

// Candidates implements [streamgate.Dispatcher].
func (d *Dispatcher) Candidates(req streamgate.DispatchRequest) streamgate.Candidates {
	return d.Pool.Candidates(d.poolRequest(req))
}

// poolRequest is the one conversion of a runtime dispatch request to the
// pool's, with this generation's aliases and queue settings.
func (d *Dispatcher) poolRequest(req streamgate.DispatchRequest) pool.ProviderPoolDispatchRequest {
	r := pool.ProviderPoolDispatchRequest{Model: req.Model, Need: req.Need, Surface: surfaceOf(req.Work),
		AvoidProviderID: req.AvoidProviderID, AllowAvoidedProviderFallback: req.AllowAvoidedProviderFallback, Exclude: req.Exclude, Prefill: req.Prefill, Pin: req.Pin}
	r.Aliases, r.Queue = d.Aliases, d.Queue
	return r
}

// surfaceOf names the surface of a request's work.
func surfaceOf(w streamgate.Work) string {
	switch {
	case w.Tunnel != nil:
		return wire.SurfaceOfPath(w.Tunnel.Path)
	case w.Native != nil:
		return wire.SurfaceOllama
	}
	return ""
}

// buildDown picks the form of the work the leased provider runs: native
// Ollama when both sides speak it, the tunnel when the provider's path is
// the tunnel, otherwise the normalized run.
func buildDown(l *pool.Lease, w streamgate.Work, attemptID string) (*wire.AttemptDown, streamgate.Kind, error) {
	ms := l.StallTimeout.Milliseconds()
	switch {
	case w.Native != nil && l.SupportsOllamaAPI:
		c := w.Native
		body, err := targetBody(l, c.Body, "application/json")
		if err != nil {
			return nil, 0, err
		}
		return &wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: string(execution.CommandOllamaAPI),
			ProviderId: l.LocalProviderID, Target: l.Target, Method: c.Method, Path: c.Path, Body: body, RunId: c.RunID, AttemptId: attemptID}}}, streamgate.KindFrames, nil
	case w.Tunnel != nil && l.SupportsTunnel && (w.Run == nil || l.Tunnels(wire.SurfaceOfPath(w.Tunnel.Path))):
		t := w.Tunnel
		body, err := targetBody(l, t.Body, http.Header(t.Header).Get("Content-Type"))
		if err != nil {
			return nil, 0, err
		}
		return &wire.AttemptDown{Msg: &wire.AttemptDown_Tunnel{Tunnel: &wire.ProviderTunnelRequest{RunId: t.RunID, AttemptId: attemptID,
			SessionId: t.SessionID, ProviderId: l.LocalProviderID, Model: l.Target, Method: t.Method, Path: t.Path,
			Headers: wire.HeadersToProto(t.Header), Body: body, ResponseStallTimeoutMs: ms}}}, streamgate.KindFrames, nil
	case w.Run != nil:
		if w.Refuse != nil {
			if e := w.Refuse(l.Adapter); e != nil {
				return nil, 0, &streamgate.RefusedError{Err: e}
			}
		}
		return &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: runRequestToProto(w.Run, l, attemptID)}}, streamgate.KindEvents, nil
	}
	return nil, 0, errors.New("the provider cannot serve this endpoint")
}

// targetBody is body as the leased provider's upstream takes it: for an
// alias, naming the target (every other byte unchanged), in a JSON body's
// model member or a form's model field; Ollama's implicit ":latest"
// needs no rewrite. A body whose model cannot be rewritten never goes out
// naming the alias.
func targetBody(l *pool.Lease, body []byte, contentType string) ([]byte, error) {
	if l.Target == l.Model || pool.OllamaName(l.Target) == pool.OllamaName(l.Model) || len(body) == 0 {
		return body, nil
	}
	nb, err := openai.WithBodyModel(body, contentType, l.Target)
	if err != nil {
		return nil, fmt.Errorf("the request's model cannot be set to the alias's target %q: %w", l.Target, err)
	}
	return nb, nil
}

// edgeAttempt is one attempt on a node, seen from the edge.
type edgeAttempt struct {
	pool   *pool.Pool
	lease  *pool.Lease
	conn   *AttemptConn
	kind   streamgate.Kind
	native bool // the work went in its Native form (Ollama's own API)

	mu         sync.Mutex
	terminated bool
	closeOnce  sync.Once
	relOnce    sync.Once
	status     int // the tunnel's upstream status, from response_start
	span       trace.Span
	// the rest of a batch being read (Recv's goroutine only)
	events []*wire.RunEvent
	frames []*wire.ProviderTunnelFrame
	// lent is the body of the last frame Recv returned: the runtime is
	// done with it at the next Recv (streamgate.Attempt), which gives it
	// back (Recv's goroutine only).
	lent []byte
	// cur is the frame Recv returned last, made in place: the runtime is
	// done with it at the next Recv too (streamgate.Attempt), so a
	// stream's frames cost no allocation each.
	cur execution.ProviderTunnelFrame
}

// release releases the lease exactly once, whichever path gets there
// first (the terminal, a link error, Close).
func (a *edgeAttempt) release() { a.relOnce.Do(func() { a.lease.Release() }) }

var (
	_ streamgate.Attempt       = (*edgeAttempt)(nil)
	_ streamgate.NativeAttempt = (*edgeAttempt)(nil)
)

// Native implements [streamgate.NativeAttempt].
func (a *edgeAttempt) Native() bool { return a.native }

func (a *edgeAttempt) Kind() streamgate.Kind { return a.kind }

// ProviderID implements [streamgate.Attempt]: the edge-owned id.
func (a *edgeAttempt) ProviderID() string { return a.lease.ProviderID }

func (a *edgeAttempt) Model() string { return a.lease.Model }

func (a *edgeAttempt) StallTimeout() time.Duration {
	if a.lease.StallTimeout <= 0 {
		return time.Duration(execution.DefaultResponseStallTimeoutMS) * time.Millisecond
	}
	return a.lease.StallTimeout
}

// Recv implements [streamgate.Attempt]. On the terminal it validates stall
// evidence against the lease and releases the lease exactly once; on a
// transport failure it releases the lease too. A batch's items come out
// one per call, in order; nothing after a terminal is delivered.
func (a *edgeAttempt) Recv() (streamgate.Item, error) {
	a.mu.Lock()
	done := a.terminated
	a.mu.Unlock()
	if done {
		return streamgate.Item{}, io.EOF
	}
	if a.lent != nil {
		eventstream.ReleaseChunk(a.lent)
		a.lent = nil
	}
	ev, fr, m, err := a.next()
	switch {
	case err != nil:
		return a.linkFailed(err)
	case ev != nil:
		return a.event(ev), nil
	case fr != nil:
		return a.frame(fr), nil
	}
	return a.other(m)
}

// More implements [streamgate.Batched]: the rest of a batch is held.
func (a *edgeAttempt) More() bool { return len(a.events)+len(a.frames) > 0 }

// The rarer items are made apart from Recv, whose frame is under every
// held stream's wait.

// linkFailed ends the attempt on the node link's receive error.
func (a *edgeAttempt) linkFailed(err error) (streamgate.Item, error) {
	a.span.SetStatus(codes.Error, "node link")
	a.release()
	return streamgate.Item{}, fmt.Errorf("node link: %w", err)
}

// other is the item of a message that is neither event nor frame: a
// native command's result, or a message the attempt cannot carry.
func (a *edgeAttempt) other(m *wire.AttemptUp) (streamgate.Item, error) {
	if cr := m.GetCommandResult(); cr != nil {
		f := execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: cr.GetError(),
			Failure: execution.NewFailure(execution.FailureCode(cr.GetErrorCode()), cr.GetError())}
		f.Failure = a.terminal(f.Failure)
		return streamgate.Item{Frame: &f}, nil
	}
	a.release()
	return streamgate.Item{}, errors.New("node link: unexpected message")
}

// next is the attempt's next item: an event or a frame — the next one of
// a batch being read, or a message's own — or any other message m. An
// empty batch is skipped.
func (a *edgeAttempt) next() (ev *wire.RunEvent, f *wire.ProviderTunnelFrame, m *wire.AttemptUp, err error) {
	for {
		if len(a.events) > 0 {
			ev, a.events[0], a.events = a.events[0], nil, a.events[1:]
			return ev, nil, nil, nil
		}
		if len(a.frames) > 0 {
			f, a.frames[0], a.frames = a.frames[0], nil, a.frames[1:]
			return nil, f, nil, nil
		}
		if m, err = a.conn.Recv(); err != nil {
			return nil, nil, nil, err
		}
		switch msg := m.Msg.(type) {
		case *wire.AttemptUp_Event:
			return msg.Event, nil, nil, nil
		case *wire.AttemptUp_Frame:
			return nil, msg.Frame, nil, nil
		case *wire.AttemptUp_Batch:
			a.events, a.frames = msg.Batch.GetEvents(), msg.Batch.GetFrames()
			if len(a.events) > 0 && len(a.frames) > 0 {
				return nil, nil, nil, errors.New("a batch mixed events and frames")
			}
		default:
			return nil, nil, m, nil
		}
	}
}

// event maps one normalized event; its terminal ends the attempt.
func (a *edgeAttempt) event(m *wire.RunEvent) streamgate.Item {
	ev := wire.RunEventFromProto(m)
	if ev.Type.IsTerminal() {
		a.report(eventResult(ev))
		ev.Failure = a.terminal(ev.Failure)
	}
	return streamgate.Item{Event: &ev}
}

// frame maps one tunnel frame; its terminal ends the attempt.
func (a *edgeAttempt) frame(m *wire.ProviderTunnelFrame) streamgate.Item {
	a.cur = wire.TunnelFrameFromProto(m)
	f := &a.cur
	if f.Type == execution.FrameTypeResponseStart {
		if f.Status < 200 || f.Status > 599 {
			// Untrusted input: a status a client must never see (a 1xx,
			// or an invented one) ends the attempt as a provider failure.
			*f = execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "invalid upstream status",
				Failure: execution.UpstreamFailure(&execution.UpstreamError{Message: fmt.Sprintf("the node reported an invalid upstream status %d", f.Status)})}
		}
		a.status = f.Status
	}
	if f.Type.IsTerminal() {
		a.report(frameResult(*f, a.status))
		f.Failure = a.terminal(f.Failure)
	}
	if f.Type == execution.FrameTypeBody {
		a.lent = f.Body // the node made it for the edge (eventstream.Chunk), or it was unmarshalled here
	}
	return streamgate.Item{Frame: f}
}

// terminal handles the attempt's terminal: stall evidence goes through
// the edge's acceptance rules; the lease is released once (except on a
// reception-owner mismatch); the edge transport is closed without another
// CancelRun.
func (a *edgeAttempt) terminal(f *execution.ExecutionFailure) *execution.ExecutionFailure {
	a.mu.Lock()
	a.terminated = true
	a.mu.Unlock()
	if f != nil && f.Code == execution.FailureCodeResponseStalled {
		f = a.pool.AcceptStall(a.lease, a.conn.Owner(), f, a.release).Failure
	} else {
		a.release()
	}
	a.conn.Finish()
	return f
}

// report feeds the attempt's result to its provider's outlier state.
func (a *edgeAttempt) report(r pool.AttemptResult) {
	switch r {
	case pool.ResultSuccess:
		a.span.SetStatus(codes.Ok, "")
	case pool.ResultServerFailure:
		a.span.SetStatus(codes.Error, "provider failure")
	}
	if a.status != 0 {
		a.span.SetAttributes(attribute.Int("http.response.status_code", a.status))
	}
	a.pool.Report(a.lease, r)
}

// eventResult classifies a normalized attempt's terminal.
func eventResult(ev execution.RunEvent) pool.AttemptResult {
	switch ev.Type {
	case execution.EventTypeComplete:
		return pool.ResultSuccess
	case execution.EventTypeError:
		return failureResult(ev.Failure)
	}
	return pool.ResultNeutral
}

// frameResult classifies a tunnel's terminal given its upstream status.
func frameResult(f execution.ProviderTunnelFrame, status int) pool.AttemptResult {
	switch {
	case f.Type == execution.FrameTypeError:
		return failureResult(f.Failure)
	case status >= 500:
		return pool.ResultServerFailure
	case status >= 200 && status < 400:
		return pool.ResultSuccess
	}
	return pool.ResultNeutral
}

// failureResult: an upstream 5xx, an unreachable upstream (no status) or
// a stream cut after its 200 is the provider's failure; a 429, a 4xx, a
// stall (the overlay's business) or a cancel says nothing about it.
func failureResult(f *execution.ExecutionFailure) pool.AttemptResult {
	if f == nil || f.Upstream == nil {
		return pool.ResultNeutral
	}
	if s := f.Upstream.Status; s == 0 || s >= 500 || s == 200 {
		return pool.ResultServerFailure
	}
	return pool.ResultNeutral
}

// Close implements [streamgate.Attempt]: an unfinished attempt is
// cancelled on its node (its stream ends) and its lease released.
func (a *edgeAttempt) Close() {
	a.closeOnce.Do(func() {
		a.conn.End()
		a.release()
		a.span.End()
	})
}

// tracedWork is w with the trace context of the attempt's span (ctx's)
// in the headers the upstream receives (copies: the request's work is
// shared by attempts).
func tracedWork(ctx context.Context, span trace.Span, w streamgate.Work) streamgate.Work {
	if !span.SpanContext().IsValid() {
		return w // tracing off: nothing to carry, nothing to copy
	}
	if w.Run != nil {
		r := *w.Run
		r.Header = tracing.Inject(ctx, r.Header)
		w.Run = &r
	}
	if w.Tunnel != nil {
		t := *w.Tunnel
		t.Header = tracing.Inject(ctx, t.Header)
		w.Tunnel = &t
	}
	return w
}
