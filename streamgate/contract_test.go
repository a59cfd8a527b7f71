package streamgate

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/surface"
)

// Regression tests for the contract audit of issue 32, each named after
// the rule it guards. They drive the runtime through its public seam
// (Serve with a fake Dispatcher), so they survive package moves.

// chainRun serves one streaming chat request for model "p" with the given
// fallbacks against w and returns the dispatch log ("model@provider") and
// the client's response.
func chainRun(t *testing.T, w *world, pol RetryPolicy, fallbacks []string, log *slog.Logger) ([]string, *httptest.ResponseRecorder) {
	t.Helper()
	var dispatched []string
	rec := httptest.NewRecorder()
	bubble.Test(t, func(t *testing.T) {
		w.tries = map[string]int{}
		cfg := Config{Dispatcher: w, Log: log, Metrics: testMetrics, Policy: func(string) RetryPolicy { return pol }}.WithDefaults()
		req := &Request{Surface: surface.Chat, Stream: true, Model: "p", Fallbacks: fallbacks, Snapshot: []byte("{}"), RequestID: "req_SENTINEL",
			RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil },
			Continue: func(m, prefix string) (Work, error) {
				return Work{Run: &execution.RunRequest{Model: m, Continuation: true,
					Messages: []execution.Message{{Role: "assistant", Content: prefix}}}}, nil
			}}
		Serve(t.Context(), &cfg, req, rec)
		dispatched = targetsOf(w.log)
	})
	return dispatched, rec
}

// TestStalledProviderAvoidedOnEveryLaterAttempt guards "pool re-admission
// consumes the provider once as AvoidProviderID, with same-provider
// fallback only for exact available evidence" across the whole fallback
// chain: one upstream serves the primary and two fallbacks; it stalls with
// a confirmed fence. With unknown or unavailable health no later attempt,
// for any model, may use it; with available evidence it may.
func TestStalledProviderAvoidedOnEveryLaterAttempt(t *testing.T) {
	for _, tt := range []struct {
		health string
		want   string // dispatches
		status int
		body   string
	}{
		{"unknown", "p@s", http.StatusGatewayTimeout, "response_stalled"},
		{"unavailable", "p@s", http.StatusGatewayTimeout, "response_stalled"},
		{"available", "p@s f1@s", http.StatusOK, "second answer"}, // another target first: the silent one last
	} {
		t.Run(tt.health, func(t *testing.T) {
			w := &world{models: map[string][]string{"p": {"s"}, "f1": {"s"}, "f2": {"s"}}}
			w.script = func(_ string, n int, _ DispatchRequest) *fakeAttempt {
				if n == 1 {
					return &fakeAttempt{items: []Item{stallItem(true, tt.health)}}
				}
				return answer("second answer")
			}
			got, rec := chainRun(t, w, DefaultRetryPolicy(), []string{"f1", "f2"}, nil)
			if strings.Join(got, " ") != tt.want || rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.body) {
				t.Fatalf("dispatches %v, client %d %q; want %s, %d %q", got, rec.Code, rec.Body.String(), tt.want, tt.status, tt.body)
			}
		})
	}
}

// TestStallEvidenceBindsEveryDispatch guards the same rule at the
// dispatcher: after the stall, every dispatch the request makes (the
// re-dispatch that found nothing and the next fallback's) carries the
// avoided provider, never a fresh request without the hint.
func TestStallEvidenceBindsEveryDispatch(t *testing.T) {
	var mu sync.Mutex
	var reqs []DispatchRequest
	calls := 0
	d := &fakeDispatcher{}
	d.candsFor = func(r DispatchRequest) Candidates {
		if r.AvoidProviderID == "n/s" {
			return Candidates{AvoidedOnly: true}
		}
		return Candidates{Alternates: 1}
	}
	d.dispatchF = func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls > 1 {
			return ErrNoProvider // the pool honours the hint: nothing else serves
		}
		return nil
	}
	d.attempts = []*fakeAttempt{{provider: "n/s", items: []Item{stallItem(true, "unknown")}}}
	rec := httptest.NewRecorder()
	cfg := Config{Dispatcher: recordingDispatcher{d, &mu, &reqs}, Metrics: testMetrics}.WithDefaults()
	Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "p", Fallbacks: []string{"f1", "f2"}, Snapshot: []byte("{}"),
		RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil }}, rec)
	if rec.Code != http.StatusGatewayTimeout {
		t.Fatalf("client got %d %s", rec.Code, rec.Body.String())
	}
	for i, r := range reqs[1:] {
		if r.AvoidProviderID != "n/s" || r.AllowAvoidedProviderFallback {
			t.Fatalf("dispatch %d after the stall: %+v", i+1, r)
		}
	}
}

// recordingDispatcher records every dispatch request before the fake
// answers it.
type recordingDispatcher struct {
	*fakeDispatcher
	mu   *sync.Mutex
	reqs *[]DispatchRequest
}

func (r recordingDispatcher) Dispatch(ctx context.Context, req DispatchRequest) (Attempt, error) {
	r.mu.Lock()
	*r.reqs = append(*r.reqs, req)
	r.mu.Unlock()
	return r.fakeDispatcher.Dispatch(ctx, req)
}

// TestResumeAfterStallNeedsTheHandoff guards "a confirmed handoff becomes
// a raw-free response_stalled error" and the replay gate's fence rules
// for resume: a committed stream whose stall has no confirmed handoff is
// never continued (the client gets the typed terminal), and every stall
// writes its eligibility row and one result row; the resume log carries
// no request, model or provider identifier.
func TestResumeAfterStallNeedsTheHandoff(t *testing.T) {
	pol := DefaultRetryPolicy()
	pol.Resume = true
	rows := func(cs, el, res string) (float64, float64) {
		return testutil.ToFloat64(testMetrics.eligibility.WithLabelValues("normalized", "unknown", cs, el)),
			testutil.ToFloat64(testMetrics.results.WithLabelValues("normalized", "unknown", res))
	}
	for _, tt := range []struct {
		name      string
		confirmed bool
		want      string
		el, res   string
		body      string
	}{
		{"unconfirmed fence is not resumed", false, "p@p1", eligibilityPostCommit, resultTerminal, `"code":"response_stalled"`},
		{"confirmed handoff is resumed", true, "p@p1 f@f1", eligibilityEligible, resultRedispatched, "[DONE]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lb := &logbuf.Buffer{}
			w := &world{models: map[string][]string{"p": {"p1"}, "f": {"f1"}}, prefill: map[string]bool{"f1": true}}
			w.script = func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return &fakeAttempt{items: []Item{delta("Hello"), stallItem(tt.confirmed, "available")}}
				}
				return &fakeAttempt{items: []Item{delta(" world."), complete()}}
			}
			e0, r0 := rows("stream_open", tt.el, tt.res)
			got, rec := chainRun(t, w, pol, []string{"f"}, slog.New(slog.NewJSONHandler(lb, nil)))
			if strings.Join(got, " ") != tt.want || !strings.Contains(rec.Body.String(), tt.body) {
				t.Fatalf("dispatches %v, client %q", got, rec.Body.String())
			}
			if e1, r1 := rows("stream_open", tt.el, tt.res); e1-e0 != 1 || r1-r0 != 1 {
				t.Fatalf("%s +%v, %s +%v", tt.el, e1-e0, tt.res, r1-r0)
			}
			for _, s := range []string{"SENTINEL", "p1", "f1", `"model"`, "request_id", "failed_provider"} {
				if strings.Contains(lb.String(), s) {
					t.Fatalf("log carries %q: %s", s, lb.String())
				}
			}
		})
	}
}

// TestFailedRedispatchEndsTheRecoveryCycle guards "records at most one
// final result per liveness cycle" with the cycle's end: an eligible
// stall whose re-dispatch fails (the node did not take the work) records
// dispatch_failed, and nothing else, for that cycle.
func TestFailedRedispatchEndsTheRecoveryCycle(t *testing.T) {
	count := func(res string) float64 {
		return testutil.ToFloat64(testMetrics.results.WithLabelValues("normalized", "unknown", res))
	}
	calls := 0
	d := &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{
		{provider: "n/a", items: []Item{stallItem(true, "unavailable")}},
		{provider: "n/c", items: []Item{delta("third"), complete()}},
	}}
	d.dispatchF = func(context.Context) error {
		calls++
		if calls == 2 {
			return &DispatchError{ProviderID: "n/b", Err: context.DeadlineExceeded}
		}
		return nil
	}
	failed0, redis0 := count(resultDispatchFailed), count(resultRedispatched)
	w := serve(t, d, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "third") {
		t.Fatalf("client got %d %s", w.Code, w.Body.String())
	}
	if f, r := count(resultDispatchFailed)-failed0, count(resultRedispatched)-redis0; f != 1 || r != 0 {
		t.Fatalf("dispatch_failed +%v, redispatched +%v; want +1, +0", f, r)
	}
}

// TestVanishedProviderIsNoProvider: the only provider's node went away
// between its lease and the dispatch (its disconnect not yet seen), and
// then nothing serves the model: the client gets 503 no_provider with a
// Retry-After, as a moment later, not the 502 of a provider's failure.
func TestVanishedProviderIsNoProvider(t *testing.T) {
	calls := 0
	d := &fakeDispatcher{dispatchF: func(context.Context) error {
		if calls++; calls == 1 {
			return &DispatchError{ProviderID: "n/a", Err: io.ErrClosedPipe}
		}
		return ErrNoProvider
	}}
	w := serve(t, d, &Request{Surface: surface.Chat, Model: "m", Snapshot: []byte("{}")}, nil)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"code":"`+codeNoProvider+`"`) || w.Header().Get("Retry-After") == "" {
		t.Fatalf("client got %d %s (Retry-After %q)", w.Code, w.Body.String(), w.Header().Get("Retry-After"))
	}
	if calls < 2 {
		t.Fatalf("%d dispatches: the vanished provider's failure was not retried", calls)
	}
}
