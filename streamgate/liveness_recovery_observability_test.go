package streamgate

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/surface"
)

// observations are the recovery observation records in lb.
func observations(lb *logbuf.Buffer) []map[string]any {
	return lb.Records("edge_liveness_recovery_observation")
}

// TestOpenAILivenessObservationSink: the request-local wrapper's phases
// and rows — idle before an eligible decision, eligible_pending until the
// cycle's one result, no metric row for a second eligibility while
// pending, closed label values, exactly the documented log fields.
func TestOpenAILivenessObservationSink(t *testing.T) {
	lb := &logbuf.Buffer{}
	o := newRecoveryObserver(slog.New(slog.NewJSONHandler(lb, nil)), testMetrics)
	el := testMetrics.eligibility.WithLabelValues("provider_tunnel", "available", "transport_uncommitted", "eligible")
	res := testMetrics.results.WithLabelValues("provider_tunnel", "available", "redispatched")
	otherEl := testMetrics.eligibility.WithLabelValues("unknown", "unknown", "unknown", "other")
	e0, r0, o0 := testutil.ToFloat64(el), testutil.ToFloat64(res), testutil.ToFloat64(otherEl)

	if o.Phase() != PhaseIdle {
		t.Fatal("a fresh wrapper is not idle")
	}
	o.eligibility("provider_tunnel", "available", TransportUncommitted, eligibilityEligible)
	if o.Phase() != PhaseEligiblePending {
		t.Fatal("not eligible_pending after an eligible decision")
	}
	o.eligibility("provider_tunnel", "available", TransportUncommitted, eligibilityEligible) // second while pending: no row
	o.result("provider_tunnel", "available", TransportUncommitted, resultRedispatched)
	if o.Phase() != PhaseIdle {
		t.Fatal("not idle after the result")
	}
	o.eligibility("weird-path", "healthy", "weird-state", "maybe") // everything outside the sets
	if d := testutil.ToFloat64(el) - e0; d != 1 {
		t.Fatalf("eligible rows +%v, want 1", d)
	}
	if d := testutil.ToFloat64(res) - r0; d != 1 {
		t.Fatalf("result rows +%v, want 1", d)
	}
	if d := testutil.ToFloat64(otherEl) - o0; d != 1 {
		t.Fatalf("normalized row +%v", d)
	}
	recs := observations(lb)
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	wantPhases := []string{PhaseIdle, PhaseEligiblePending, PhaseEligiblePending, PhaseIdle}
	wantEligibility := []string{"eligible", "", "", "other"}
	for i, r := range recs {
		if r["phase"] != wantPhases[i] || r["eligibility"] != wantEligibility[i] {
			t.Fatalf("record %d: %v", i, r)
		}
		for _, k := range []string{"phase", "execution_path", "provider_health", "commit_state", "eligibility", "recovery_result"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("record %d lacks %s", i, k)
			}
		}
		if len(r) != 9 { // the six fields + time, level, msg
			t.Fatalf("record %d has extra fields: %v", i, r)
		}
	}
	if recs[2]["recovery_result"] != "redispatched" {
		t.Fatalf("result record %v", recs[2])
	}
}

func serve(t *testing.T, d *fakeDispatcher, req *Request, log *slog.Logger) *httptest.ResponseRecorder {
	t.Helper()
	cfg := Config{Dispatcher: d, Log: log, Metrics: testMetrics}.WithDefaults()
	w := httptest.NewRecorder()
	Serve(context.Background(), &cfg, req, w)
	return w
}

// TestOpenAILivenessRecoveryObservability drives whole requests: an
// eligible pre-commit stall (redispatched), a post-commit stall
// (terminal), an unconfirmed fence, and asserts the rows and that no
// identifier reaches the log.
func TestOpenAILivenessRecoveryObservability(t *testing.T) {
	lb := &logbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(lb, nil))
	count := func(el, res string, cs string) (float64, float64) {
		return testutil.ToFloat64(testMetrics.eligibility.WithLabelValues("normalized", "unknown", cs, el)),
			testutil.ToFloat64(testMetrics.results.WithLabelValues("normalized", "unknown", res))
	}
	req := func() *Request {
		return &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte(`{"model":"m"}`), RequestID: "req_SENTINEL"}
	}

	// Pre-commit stall, confirmed handoff, an alternate exists.
	e0, r0 := count(eligibilityEligible, resultRedispatched, "transport_uncommitted")
	d := &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{
		{provider: "n/a", items: []Item{stallItem(true, "available")}},
		{provider: "n/b", items: []Item{delta("hello"), complete()}},
	}}
	w := serve(t, d, req(), log)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "hello") || !strings.Contains(w.Body.String(), "[DONE]") {
		t.Fatalf("replayed response %d %s", w.Code, w.Body.String())
	}
	if e1, r1 := count(eligibilityEligible, resultRedispatched, "transport_uncommitted"); e1-e0 != 1 || r1-r0 != 1 {
		t.Fatalf("eligible +%v redispatched +%v", e1-e0, r1-r0)
	}
	if len(d.requests) != 2 || d.requests[1].AvoidProviderID != "n/a" || !d.requests[1].AllowAvoidedProviderFallback {
		t.Fatalf("re-admission %+v", d.requests)
	}

	// Same, but the probe said unavailable: no same-provider fallback.
	d = &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{
		{provider: "n/a", items: []Item{stallItem(true, "unavailable")}},
		{provider: "n/b", items: []Item{delta("x"), complete()}},
	}}
	serve(t, d, req(), log)
	if d.requests[1].AllowAvoidedProviderFallback {
		t.Fatal("fallback permitted without exact available evidence")
	}

	// Only the avoided provider, health unknown: same_provider_forbidden.
	e0, r0 = count(eligibilitySameProviderForbidden, resultTerminal, "transport_uncommitted")
	d = &fakeDispatcher{cands: Candidates{AvoidedOnly: true}, attempts: []*fakeAttempt{{provider: "n/a", items: []Item{stallItem(true, "unknown")}}}}
	if w := serve(t, d, req(), log); w.Code != http.StatusGatewayTimeout {
		t.Fatalf("same provider forbidden: %d", w.Code)
	}
	if e1, r1 := count(eligibilitySameProviderForbidden, resultTerminal, "transport_uncommitted"); e1-e0 != 1 || r1-r0 != 1 {
		t.Fatalf("same_provider_forbidden +%v terminal +%v", e1-e0, r1-r0)
	}

	// Post-commit stall: typed in-band terminal.
	e0, r0 = count(eligibilityPostCommit, resultTerminal, "stream_open")
	d = &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{{provider: "n/a", items: []Item{delta("partial"), stallItem(true, "available")}}}}
	w = serve(t, d, req(), log)
	if body := w.Body.String(); !strings.Contains(body, "partial") || !strings.Contains(body, `"code":"response_stalled"`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("post-commit body %s", body)
	}
	if e1, r1 := count(eligibilityPostCommit, resultTerminal, "stream_open"); e1-e0 != 1 || r1-r0 != 1 {
		t.Fatalf("post_commit +%v terminal +%v", e1-e0, r1-r0)
	}

	// Unconfirmed fence.
	e0, _ = count(eligibilityUnconfirmedFence, resultTerminal, "transport_uncommitted")
	d = &fakeDispatcher{cands: Candidates{Alternates: 1}, attempts: []*fakeAttempt{{provider: "n/a", items: []Item{stallItem(false, "available")}}}}
	serve(t, d, req(), log)
	if e1, _ := count(eligibilityUnconfirmedFence, resultTerminal, "transport_uncommitted"); e1-e0 != 1 {
		t.Fatalf("unconfirmed_fence +%v", e1-e0)
	}

	logs := lb.String()
	for _, s := range []string{"SENTINEL", "n/a", "n/b", `"model"`} {
		if strings.Contains(logs, s) {
			t.Fatalf("log carries %q: %s", s, logs)
		}
	}
}
