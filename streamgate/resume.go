package streamgate

import (
	"context"
	"net/http"
	"strings"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Resuming a committed stream (retry.resume): a text stream that was cut
// or stalled after the client got part of it is continued in the same
// response, by the first rung of this ladder that has a candidate:
//
//  1. prefill — a provider that continues an assistant prefill
//     (prefill: true) gets the original request plus the text the client
//     has as a trailing assistant message, and only its continuation is
//     streamed: another provider of the model, then the fallback models;
//  2. splice — the original request again, without prefill, on a target
//     that has not failed the stream (a provider that refused the prefill
//     is healthy and may take it); its output is held until it has
//     reproduced, byte for byte, the text the client already has, and
//     only what follows is streamed. The moment it differs, the stream
//     ends with the typed terminal resume_diverged, no byte of the
//     difference sent: exact for deterministic generation (temperature 0,
//     a seed, a deterministic provider), failing closed otherwise.
//
// A target is a (provider, model) pair: a cut or stall of model A on a
// server says nothing about model B there. A refused prefill is never the
// client's last word: with no rung left, the client gets the original
// cut's terminal.

// resumeMode is how the current attempt continues the stream.
type resumeMode int

const (
	resumeOff     resumeMode = iota
	resumePrefill            // the attempt continues after an assistant prefill
	resumeSplice             // the attempt regenerates; its output must reproduce the delivered text first
)

// resumeState is what a request that may be resumed keeps: the assistant
// text the client has, and who failed it.
type resumeState struct {
	text    strings.Builder       // assistant text delivered to the client
	mode    resumeMode            // of the current attempt
	active  bool                  // the current attempt continues a committed stream
	failed  targets               // targets that cut or stalled the stream
	refused targets               // targets that refused the prefill (healthy: they may splice)
	cut     *outcome              // the last failure after output: the client's terminal if nothing continues
	usage   *execution.TokenUsage // usage the earlier attempts reported
	want    string                // splice: the text to reproduce
	matched int                   // splice: bytes of want reproduced so far
}

// targets is a set of (provider, model) pairs.
type targets map[string]bool

func targetKey(provider, model string) string { return strings.ToLower(model) + "\x00" + provider }

func (t *targets) add(provider, model string) {
	if *t == nil {
		*t = targets{}
	}
	(*t)[targetKey(provider, model)] = true
}

// providers lists the providers in t for model.
func (t targets) providers(model string) []string {
	var out []string
	prefix := strings.ToLower(model) + "\x00"
	for k := range t {
		if p, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, p)
		}
	}
	return out
}

// delivered records output the client now has.
func (s *resumeState) delivered(ev execution.RunEvent) {
	s.text.WriteString(ev.Delta)
	s.text.WriteString(ev.Message)
}

// resume continues a committed text stream that was cut or stalled, when
// the model's policy allows it, by the ladder above. It reports whether
// another attempt follows; false leaves the failure to failover, which
// ends the stream with its typed terminal.
func (rt *runtime) resume(ctx context.Context, o outcome, dreq *DispatchRequest) bool {
	rs := &rt.rs
	rt.noteResumeFailure(o, dreq.Model)
	if !rt.canResume(ctx, o, dreq.Model) {
		rt.endResume()
		return false
	}
	next, mode, ok := rt.nextContinuation(dreq.Model)
	if !ok {
		rt.cfg.Metrics.resumes.WithLabelValues("no_candidate").Inc()
		rt.endResume()
		return false
	}
	if rt.takeBudget(o) != nil {
		rt.cfg.Metrics.resumes.WithLabelValues("budget_exhausted").Inc()
		rt.endResume()
		return false
	}
	rs.active, rs.mode, rs.usage = true, mode, rt.sum.Usage
	if mode == resumeSplice {
		rs.want, rs.matched = rs.text.String(), 0
	}
	rt.sum.Resumes++
	rt.cfg.Metrics.resumes.WithLabelValues(mode.String()).Inc()
	if o.kind == outStall {
		// The same recovery cycle as a replay: eligible now, its result
		// from the continuation's dispatch.
		rt.stallObserved(o, eligibilityEligible)
	}
	// Closed fields only (the recovery log's leakage rules): no request,
	// provider or model identifier.
	rt.cfg.Log.Info("resuming a cut stream", "execution_path", closed(paths, o.path, "unknown"),
		"failure", classify(o).String(), "resume", mode.String(), "delivered_bytes", rs.text.Len())
	*dreq = next
	return true
}

func (m resumeMode) String() string { return [...]string{"off", "prefill", "splice"}[m] }

// noteResumeFailure records who failed the stream: a refused prefill
// (an error answer, no output) marks its target refused, anything else
// failed.
func (rt *runtime) noteResumeFailure(o outcome, model string) {
	rs := &rt.rs
	if o.producedOutput || rs.cut == nil {
		rs.cut = &o
	}
	refusal := rs.mode == resumePrefill && o.kind == outUpstream && !o.producedOutput && o.upstream != nil &&
		o.upstream.Status >= 400 && o.upstream.Status < 500 && o.upstream.Status != http.StatusTooManyRequests
	if refusal {
		rs.refused.add(o.providerID, model)
	} else if o.providerID != "" {
		rs.failed.add(o.providerID, model)
	}
}

// nextContinuation finds the first rung with a candidate: prefill on the
// current model then each fallback, then (unless the model's policy turns
// it off) splice the same way. Moving to a fallback model consumes the
// chain up to it.
func (rt *runtime) nextContinuation(model string) (DispatchRequest, resumeMode, bool) {
	models := append([]string{model}, rt.models...)
	for _, mode := range []resumeMode{resumePrefill, resumeSplice} {
		if mode == resumeSplice && (rt.req.RebuildForModel == nil || rt.policy(model).NoSplice) {
			break
		}
		for i, m := range models {
			next, ok := rt.continuationFor(m, mode)
			if !ok || !rt.servable(next) {
				continue
			}
			if i > 0 {
				rt.models = rt.models[i:]
				rt.modelRetries = 0
				rt.sum.Fallbacks++
			}
			return next, mode, true
		}
	}
	return DispatchRequest{}, resumeOff, false
}

// continuationFor is the dispatch of a continuation on model by mode, nil
// work when the request cannot be continued that way.
func (rt *runtime) continuationFor(model string, mode resumeMode) (DispatchRequest, bool) {
	rs := &rt.rs
	next := DispatchRequest{Model: model, Need: rt.req.Need, Exclude: rs.failed.providers(model)}
	var err error
	switch mode {
	case resumePrefill:
		next.Prefill = true
		next.Exclude = append(next.Exclude, rs.refused.providers(model)...)
		next.Work, err = rt.req.Continue(model, rs.text.String())
	case resumeSplice:
		next.Work, err = rt.req.RebuildForModel(model)
		next.Work.Tunnel, next.Work.Native = nil, nil // iop must read the text to verify it
	}
	return next, err == nil && next.Work.Run != nil
}

// canResume applies the resume conditions: a committed streaming text
// answer (no tool call, no side effect, no prefill of the client's, which
// a continuation would have to join), the model's policy on, a failure
// of the provider rather than of the request, and text to continue.
func (rt *runtime) canResume(ctx context.Context, o outcome, model string) bool {
	switch {
	case ctx.Err() != nil, rt.req.Continue == nil, !rt.req.Stream, rt.sawToolCall, rt.req.SideEffects, rt.req.Prefill:
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
func (rt *runtime) endResume() { rt.rs.active, rt.rs.mode = false, resumeOff }

// continuation adapts a resumed attempt's events: its start is not
// rendered again (the stream has its identity), reasoning is dropped
// (the client's reasoning already ended), a splice's reproduction of the
// delivered text is checked and dropped, and usage adds up the attempts
// that reported it. It reports whether to render ev, and the outcome
// that ends the attempt when a splice diverged.
func (rt *runtime) continuation(ev *execution.RunEvent) (bool, *outcome) {
	rs := &rt.rs
	if ev.Type == execution.EventTypeStart {
		return false, nil
	}
	ev.Reasoning = ""
	if rs.mode == resumeSplice {
		if keep, ok := rs.splice(ev); !ok {
			return false, &outcome{kind: outDiverged}
		} else if !keep {
			return false, nil
		}
	}
	if ev.Usage != nil && rs.usage != nil {
		u := *ev.Usage
		u.PromptTokens += rs.usage.PromptTokens
		u.CompletionTokens += rs.usage.CompletionTokens
		u.TotalTokens += rs.usage.TotalTokens
		u.CachedTokens += rs.usage.CachedTokens
		u.ReasoningTokens += rs.usage.ReasoningTokens
		ev.Usage = &u
	}
	return true, nil
}

// splice checks one event of a regenerating attempt against the text the
// client has: the reproduced part is cut off the event (keep false when
// nothing is left of it); ok is false when the event differs from that
// text, or the answer ends (or calls a tool) before reproducing all of it.
func (s *resumeState) splice(ev *execution.RunEvent) (keep, ok bool) {
	if s.matched == len(s.want) {
		return true, true
	}
	switch {
	case len(ev.ToolCalls) > 0, ev.Type == execution.EventTypeComplete:
		return false, false
	case ev.Type != execution.EventTypeDelta && ev.Type != execution.EventTypeMessage:
		return ev.Type == execution.EventTypeUsage, true
	}
	for _, p := range []*string{&ev.Delta, &ev.Message} {
		n := min(len(*p), len(s.want)-s.matched)
		if (*p)[:n] != s.want[s.matched:s.matched+n] {
			return false, false
		}
		s.matched += n
		*p = (*p)[n:]
	}
	return ev.Delta != "" || ev.Message != "", true
}

// divergedError is the terminal of a splice whose regeneration did not
// reproduce the text the client has.
func divergedError() *openai.Error {
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeResumeDiverged,
		Message: "The provider's stream was cut; it was generated again to continue it, but the new generation differed from the text " +
			"already sent (continuing is exact only for deterministic generation), so the response ends here, incomplete."}
}
