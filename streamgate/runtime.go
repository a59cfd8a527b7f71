package streamgate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// Config is shared by every request's runtime.
type Config struct {
	Dispatcher Dispatcher
	Budget     *Budget
	Clock      Clock        // default RealClock
	Log        *slog.Logger // default discard
	// MaxAttempts bounds attempts per request, over every model (first +
	// retries + fallbacks); default 10.
	MaxAttempts int
	// WriteTimeout bounds each write to the client; a client that stops
	// reading is cut off and its upstream cancelled. Default 60s.
	WriteTimeout time.Duration
	// Hold keeps output back before commit, widening the replay window at
	// the cost of time to first token. Zero values disable it.
	Hold HoldConfig
	// Policy returns a model's retry policy; nil means DefaultRetryPolicy
	// for every model.
	Policy func(model string) RetryPolicy
	// BackstopMargin is how long past a provider's stall timeout the edge
	// waits on a silent attempt before ending it itself. Default 15s.
	BackstopMargin time.Duration
	// Filter is the semantic filter; nil or disabled passes everything.
	Filter *Filter
	// Drain, when done, ends every request still streaming with a typed
	// terminal (the host's shutdown deadline passed).
	Drain context.Context
	// Metrics are the collectors the runtime counts on; default a set on
	// a private registry (nothing exported).
	Metrics *Metrics
}

// HoldConfig configures the commit hold.
type HoldConfig struct {
	MaxDelay  time.Duration // release held output this long after the first
	MaxEvents int           // or once this many events are held
}

func (h HoldConfig) enabled() bool { return h.MaxDelay > 0 || h.MaxEvents > 0 }

// WithDefaults returns c with defaults filled.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = RealClock
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.BackstopMargin <= 0 {
		c.BackstopMargin = 15 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics, _ = NewMetrics(prometheus.NewRegistry()) // a fresh registry never refuses
	}
	if c.Budget == nil {
		c.Budget = NewBudget(BudgetConfig{}, c.Clock)
	}
	return c
}

// Request is one client request as the runtime needs it.
type Request struct {
	// Surface is the route the request came in on (nil: Chat).
	Surface *surface.Surface
	Stream  bool
	Model   string
	// Fallbacks are the models to try, in order, when Model cannot answer.
	Fallbacks []string
	Need      Need
	Work      Work
	// Snapshot is the request body retained for replay; nil when it was
	// larger than the configured snapshot size (then nothing is replayed).
	Snapshot []byte
	// SideEffects marks requests asking for server-executed tools.
	SideEffects  bool
	IncludeUsage bool
	Echo         openai.ResponseEcho
	// RequestID is the gateway's id for the request, sent as X-Request-Id
	// on responses the gateway renders itself.
	RequestID string
	// AskedModelName makes rendered answers name the model the client asked
	// for (an alias), not the one the upstream reports.
	AskedModelName bool
	// ResponseHeader is set on the response whatever answers it (the
	// edge's own rate-limit headers), over the upstream's.
	ResponseHeader http.Header
	// RebuildForModel returns Work for another model (fallbacks); nil
	// when the request cannot be rebuilt.
	RebuildForModel func(model string) (Work, error)
	// Reshape, when set, turns the whole (JSON) answer of an attempt that
	// ran the request's Tunnel form into the client's surface (an OpenAI
	// embeddings answer into Ollama's): the status stays, the header and
	// body are replaced (the status too, when the answer cannot be
	// reshaped). An attempt on the Native form is never reshaped.
	Reshape func(status int, header http.Header, body []byte) (int, http.Header, []byte)
	// PromptEstimate is the gateway's estimate of the prompt's tokens,
	// charged when the upstream reports no usage.
	PromptEstimate int64
	// OutputLimit is the request's own output limit (max_tokens) when it
	// has no normalized run to carry one (a tunnel-only surface); 0 when
	// it sets none.
	OutputLimit int64
	// Continue returns the Work that continues the answer after prefix
	// (the assistant text the client has) on model: the normalized run
	// with the prefix as a trailing assistant message. Nil when the
	// request cannot be resumed.
	Continue func(model, prefix string) (Work, error)
	// Prefill: the request ends with an assistant prefill that its answer
	// continues (an Anthropic client's), so every attempt goes to a
	// provider that continues one (DispatchRequest.Prefill); its Run is a
	// Continuation.
	Prefill bool
	// Pin, when set, is the only provider (edge id) that may serve the
	// request: the one keeping the stored response it names. A pinned
	// request has no fallback models.
	Pin string
	// Uncharged: what answers the request is not usage (a stored
	// response retrieved); nothing is charged or estimated.
	Uncharged bool
	// Answer, when set, is the request's whole answer (200, JSON), which
	// Answer writes without dispatching anything: a request that asks a
	// provider for nothing (an Ollama load).
	Answer []byte
}

// Summary is what one request came to, for the access log: no prompt,
// no response text, no credential.
type Summary struct {
	Attempts  int                   // attempts started (first + retries and fallbacks)
	Retries   int                   // attempts again on the same model
	Fallbacks int                   // moves to a fallback model
	Resumes   int                   // committed streams continued on another attempt
	Model     string                // the model of the last attempt (the one that answered, if any)
	Provider  string                // its provider, "<node_id>/<provider_id>"
	Path      string                // its execution path
	Outcome   string                // ok, client_cancelled, or the typed error code the client got
	FirstByte time.Duration         // from the start to the first byte written (0: none)
	Usage     *execution.TokenUsage // as the upstream reported it, else estimated; nil when nothing is charged
	// UsageEstimated: the upstream reported no usage and Usage is the
	// runtime's estimate of what was delivered (see EstimateUsage).
	UsageEstimated bool
	// ResponseID is the id of a Responses API answer an upstream gave
	// (passed through; "" for any other answer): where it is stored.
	ResponseID string
}

// Serve runs one request to its end, writing the response to w, and
// says what it came to.
func Serve(ctx context.Context, cfg *Config, req *Request, w http.ResponseWriter) *Summary {
	if req.Surface == nil {
		req.Surface = surface.Chat
	}
	resp := newResponder(w, cfg.WriteTimeout)
	resp.extra = req.ResponseHeader
	rt := &runtime{cfg: cfg, req: req, resp: resp, obs: newRecoveryObserver(cfg.Log, cfg.Metrics),
		start: time.Now()}
	end := cfg.Budget.Begin()
	defer end()
	rt.run(ctx)
	return rt.summary()
}

// Answer writes a request's own answer (Request.Answer), which nothing
// is dispatched for, and says what it came to. It is apart from Serve,
// whose frame is under every held stream's wait (TestHeldStreamStack).
func Answer(cfg *Config, req *Request, w http.ResponseWriter) *Summary {
	resp := newResponder(w, cfg.WriteTimeout)
	resp.extra = req.ResponseHeader
	rt := &runtime{cfg: cfg, req: req, resp: resp, start: time.Now()}
	_ = resp.respond(http.StatusOK, rt.head("application/json; charset=utf-8"), req.Answer)
	return rt.summary()
}

// summary settles the request's usage and says what it came to.
func (rt *runtime) summary() *Summary {
	rt.settleUsage()
	if rt.req.Uncharged {
		rt.sum.Usage, rt.sum.UsageEstimated = nil, false
	}
	rt.sum.Attempts = rt.attempts
	if at := rt.resp.committedAt(); !at.IsZero() {
		rt.sum.FirstByte = at.Sub(rt.start)
	}
	if rt.sum.Outcome == "" {
		rt.sum.Outcome = "ok"
	}
	return &rt.sum
}

// runtime is one request's state. Not safe for concurrent use (the hold
// timer only touches the responder, which is).
type runtime struct {
	cfg  *Config
	req  *Request
	resp *responder
	obs  *recoveryObserver

	attempts      int
	models        []string // remaining fallback models
	modelRetries  int      // retries taken on the current model
	sawToolCall   bool
	releaseBudget func()
	cyclePending  bool        // a stall recovery cycle awaits its result
	cyclePath     string      // its execution path
	cur           *attemptRun // the latest attempt (the one that committed, if any)
	lastFail      *outcome    // the last failed attempt, answered if no other attempt can start
	rs            resumeState
	output        eventstream.Output // generated output delivered to the client, over every attempt
	unreported    eventstream.Output // of which attempts that reported no usage delivered
	avoid         avoidance          // stall evidence, bound to every dispatch of the request
	dreq          DispatchRequest    // the request's next dispatch (run)
	start         time.Time
	sum           Summary
}

func (rt *runtime) run(ctx context.Context) {
	rt.models = append([]string(nil), rt.req.Fallbacks...)
	dreq := &rt.dreq // in rt: run's frame is under every attempt's wait
	dreq.Model, dreq.Need, dreq.Work, dreq.Prefill, dreq.Pin = rt.req.Model, rt.req.Need, rt.req.Work, rt.req.Prefill, rt.req.Pin
	defer rt.endBudget()
	for {
		att, err := rt.dispatch(ctx, dreq)
		if err != nil {
			if rt.notDispatched(ctx, err) {
				continue
			}
			return
		}
		rt.started(att)
		reported := rt.sum.Usage
		out := rt.pump(ctx, att)
		att.Close()
		if rt.resp.State() != TransportUncommitted { // an attempt that ended uncommitted delivered nothing
			d := rt.cur.delivered()
			rt.output.Add(d)
			if rt.sum.Usage == reported {
				rt.unreported.Add(d) // delivered, but its upstream reported no usage for it
			}
		}
		rt.endBudget()
		rt.cfg.Metrics.attempts.WithLabelValues(out.kind.String()).Inc()
		if !rt.next(ctx, out, dreq) {
			return
		}
	}
}

// started counts a dispatched attempt; the summary names its model,
// provider and path.
func (rt *runtime) started(att Attempt) {
	rt.attempts++
	rt.sum.Model, rt.sum.Provider, rt.sum.Path = att.Model(), att.ProviderID(), pathOf(att.Kind())
}

// notDispatched follows a dispatch that failed with err, and reports
// whether another dispatch follows. A leased provider's node that did not
// take the work is failed over like a refused connection: nothing reached
// a provider.
func (rt *runtime) notDispatched(ctx context.Context, err error) bool {
	var de *DispatchError
	if !errors.As(err, &de) || ctx.Err() != nil {
		rt.dispatchFailed(ctx, err)
		return false
	}
	rt.attempts++
	rt.cfg.Metrics.attempts.WithLabelValues(outTransport.String()).Inc()
	rt.cycleResult(resultDispatchFailed) // a stall's re-dispatch ends its cycle here
	return rt.next(ctx, &outcome{kind: outTransport, providerID: de.ProviderID, path: "unknown", cause: causeDispatch}, &rt.dreq)
}

// dispatch gets an attempt, moving to fallback models while the current
// one has no provider.
func (rt *runtime) dispatch(ctx context.Context, dreq *DispatchRequest) (Attempt, error) {
	for {
		att, err := rt.cfg.Dispatcher.Dispatch(ctx, rt.avoid.bind(*dreq))
		if err == nil {
			rt.cycleResult(resultRedispatched)
			return att, nil
		}
		if !errors.Is(err, ErrNoProvider) || !rt.fallback(dreq) {
			return nil, err
		}
	}
}

// fallback moves dreq to the next fallback model that has a provider;
// false when none is left or the request cannot be rebuilt for it.
func (rt *runtime) fallback(dreq *DispatchRequest) bool {
	if rt.rs.active {
		return false // a continuation moves by the resume ladder, not here
	}
	for len(rt.models) > 0 && rt.req.RebuildForModel != nil {
		model := rt.models[0]
		rt.models = rt.models[1:]
		work, err := rt.req.RebuildForModel(model)
		if err != nil {
			continue
		}
		// Exclusion is per (provider, model): a provider that failed the
		// previous model may serve this one (rt.avoid still binds stall
		// evidence and providers that could not be reached).
		next := DispatchRequest{Model: model, Need: dreq.Need, Work: work, Prefill: rt.req.Prefill, Pin: rt.req.Pin}
		if !rt.servable(next) {
			continue // nothing serves it now: the next one
		}
		*dreq = next
		rt.modelRetries = 0
		rt.sum.Fallbacks++
		return true
	}
	return false
}

// candidates counts who could serve r now, under the request's stall
// evidence.
func (rt *runtime) candidates(r DispatchRequest) Candidates {
	return rt.cfg.Dispatcher.Candidates(rt.avoid.bind(r))
}

// servable reports whether someone could serve r now: an alternate, or
// the avoided provider where the evidence allows it (a stalled provider
// with exact available evidence may serve another model).
func (rt *runtime) servable(r DispatchRequest) bool {
	b := rt.avoid.bind(r)
	c := rt.cfg.Dispatcher.Candidates(b)
	return c.Alternates > 0 || c.AvoidedOnly && b.AllowAvoidedProviderFallback
}

func (rt *runtime) endBudget() {
	if rt.releaseBudget != nil {
		rt.releaseBudget()
		rt.releaseBudget = nil
	}
}

// cycleResult resolves an open stall-recovery cycle.
func (rt *runtime) cycleResult(result string) {
	if !rt.cyclePending {
		return
	}
	rt.cyclePending = false
	rt.obs.result(rt.cyclePath, "unknown", rt.resp.State(), result)
}

// dispatchFailed answers a request that could not get (another) attempt.
func (rt *runtime) dispatchFailed(ctx context.Context, err error) {
	switch {
	case ctx.Err() != nil:
		rt.cycleResult(resultNotSelected)
		rt.cfg.Metrics.clientCancelled.Inc()
		return
	case errors.As(err, new(*RefusedError)):
		rt.cycleResult(resultNotSelected)
		var re *RefusedError
		errors.As(err, &re)
		rt.fail(ctx, re.Err, nil)
		return
	case errors.Is(err, ErrNoProvider):
		rt.cycleResult(resultNotSelected)
	default:
		rt.cycleResult(resultDispatchFailed)
	}
	if rt.rs.cut != nil && rt.resp.State() != TransportUncommitted {
		// A continuation found nowhere to go: the client gets the cut.
		rt.fail(ctx, nil, rt.rs.cut)
		return
	}
	if rt.lastFail != nil && !(rt.lastFail.cause == causeDispatch && errors.Is(err, ErrNoProvider)) {
		// Failover found nowhere to go: the client gets the failure itself.
		rt.fail(ctx, nil, rt.lastFail)
		return
	}
	if rt.prefillUnserved(err) {
		rt.fail(ctx, prefillError(), nil)
		return
	}
	// Nothing to dispatch to — nothing before either, or only a provider
	// whose node went away before it took the work (its disconnect not yet
	// seen when it was leased): no provider, not a provider's failure.
	rt.fail(ctx, dispatchError(err), nil)
}

// prefillUnserved reports whether a client's prefill is why its first
// dispatch found no provider: the model has providers, none of which
// continues a prefill — the client's to change, not a retry's.
func (rt *runtime) prefillUnserved(err error) bool {
	return rt.req.Prefill && rt.attempts == 0 && errors.Is(err, ErrNoProvider) &&
		rt.servable(DispatchRequest{Model: rt.req.Model, Need: rt.req.Need, Work: rt.req.Work})
}

// dispatchError maps a dispatch failure to the client's error.
func dispatchError(err error) *openai.Error {
	switch {
	case errors.Is(err, ErrQueueFull):
		return &openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit, Code: codeQueueFull,
			Message: "All providers for this model are busy and its queue is full (queue.max_length); the request could not be queued. Please retry shortly."}
	case errors.Is(err, ErrQueueTimeout):
		return &openai.Error{Status: http.StatusTooManyRequests, Type: openai.TypeRateLimit, Code: codeQueueTimeout,
			Message: "All providers for this model stayed busy for as long as a request may wait for one (queue.max_wait). Please retry shortly."}
	case errors.Is(err, ErrNoProvider):
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServiceUnavailable, Code: codeNoProvider,
			Message: "No provider is currently available for this model."}
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeUpstreamUnavailable,
		Message: "The provider could not be reached."}
}

// sleep waits d or until ctx ends; false when ctx ended.
func (rt *runtime) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := rt.cfg.Clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

func pathOf(k Kind) string {
	if k == KindFrames {
		return string(execution.ExecutionPathProviderTunnel)
	}
	return string(execution.ExecutionPathNormalized)
}
