package streamgate

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/iopgw/iop/execution"
)

// resumeState is what a request that may be resumed keeps: the assistant
// text the client has, and who failed it.
type resumeState struct {
	text   strings.Builder       // assistant text delivered to the client
	active bool                  // the current attempt continues a committed stream
	failed []string              // providers that cut or refused the stream
	cut    *outcome              // the last failure after output: the client's terminal if nothing continues
	usage  *execution.TokenUsage // usage the resumed attempts reported
}

// delivered records output the client now has.
func (s *resumeState) delivered(ev execution.RunEvent) {
	s.text.WriteString(ev.Delta)
	s.text.WriteString(ev.Message)
}

// resume continues a committed text stream that was cut or stalled, when
// the model's policy allows it: the original request plus the text the
// client has, as an assistant prefix, goes to a provider that continues a
// prefill (another provider of the model, then the fallback models), and
// only the continuation is streamed into the same response. It reports
// whether another attempt follows; false leaves the failure to failover,
// which ends the stream with its typed terminal.
func (rt *runtime) resume(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	rs := &rt.rs
	if o.producedOutput {
		rs.cut = &o
	}
	if !rt.canResume(ctx, o, dreq.Model) {
		rt.endResume()
		return false
	}
	rs.failed = append(rs.failed, o.providerID)
	next := *dreq
	work, err := rt.req.Continue(dreq.Model, rs.text.String())
	if err == nil {
		next.Work = work
		next.Prefill, next.Exclude = true, slices.Clone(rs.failed)
	}
	if err != nil || rt.candidates(next).Alternates == 0 {
		rs.active = true // fallback() builds continuations from here on
		if !rt.fallback(&next) {
			rt.cfg.Metrics.resumes.WithLabelValues("no_candidate").Inc()
			rt.endResume()
			return false
		}
	}
	if rt.takeBudget(o) != nil {
		rt.cfg.Metrics.resumes.WithLabelValues("budget_exhausted").Inc()
		rt.endResume()
		return false
	}
	rs.active, rs.usage = true, rt.sum.Usage
	rt.sum.Resumes++
	rt.cfg.Metrics.resumes.WithLabelValues("continued").Inc()
	if o.kind == outStall {
		// The same recovery cycle as a replay: eligible now, its result
		// from the continuation's dispatch.
		rt.stallObserved(o, eligibilityEligible)
	}
	// Closed fields only (the recovery log's leakage rules): no request,
	// provider or model identifier.
	rt.cfg.Log.Info("resuming a cut stream", "execution_path", closed(paths, o.path, "unknown"),
		"failure", classify(o).String(), "delivered_bytes", rs.text.Len())
	*dreq = next
	return true
}

// canResume applies the resume conditions: a committed streaming text
// answer (no tool call, no side effect), the model's policy on, a failure
// of the provider rather than of the request, and text to continue.
func (rt *runtime) canResume(ctx context.Context, o outcome, model string) bool {
	switch {
	case ctx.Err() != nil, rt.req.Continue == nil, !rt.req.Stream, rt.sawToolCall, rt.req.SideEffects:
		return false
	case rt.cur == nil || rt.cur.enc == nil, rt.rs.text.Len() == 0:
		return false
	case !rt.policy(model).Resume && !rt.policy(rt.req.Model).Resume:
		return false
	}
	switch o.kind {
	case outStall:
		// The contract's handoff gate, as for a replay (less the commit,
		// which a resume is for): a confirmed handoff, the fence released.
		return replayGate(false, false, false, true, o) == ""
	case outAbnormal, outTransport:
		return true
	case outUpstream:
		return o.upstream == nil || o.upstream.Status == 0 || o.upstream.Status >= http.StatusInternalServerError ||
			o.upstream.Status == http.StatusTooManyRequests || !o.producedOutput
	}
	return false
}

// endResume ends resuming.
func (rt *runtime) endResume() { rt.rs.active = false }

// continuation adapts a resumed attempt's events: its start is not
// rendered again (the stream has its identity), reasoning is dropped
// (the client's reasoning already ended), and usage adds up the attempts
// that reported it.
func (rt *runtime) continuation(ev *execution.RunEvent) bool {
	rs := &rt.rs
	if ev.Type == execution.EventTypeStart {
		return false
	}
	ev.Reasoning = ""
	if ev.Usage != nil && rs.usage != nil {
		u := *ev.Usage
		u.PromptTokens += rs.usage.PromptTokens
		u.CompletionTokens += rs.usage.CompletionTokens
		u.TotalTokens += rs.usage.TotalTokens
		u.CachedTokens += rs.usage.CachedTokens
		u.ReasoningTokens += rs.usage.ReasoningTokens
		ev.Usage = &u
	}
	return true
}
