package streamgate

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/surface"
)

// TestNext is the decision after an attempt, over outcome × candidates ×
// commit state, with the default policy; the expected column is written by
// hand. "→ m@excluded" is another attempt on model m excluding those
// providers; "end: …" is what the client got.
func TestNext(t *testing.T) {
	up := func(status int, code string) outcome {
		return outcome{kind: outUpstream, providerID: "p1", upstream: &execution.UpstreamError{Status: status, Code: code, Message: "no"}}
	}
	stall := func(health execution.HealthStatus) outcome {
		return outcome{kind: outStall, providerID: "p1", confirmed: true, fenceSeen: true, health: health}
	}
	tests := []struct {
		name         string
		o            outcome
		committed    bool
		alternates   int  // other providers of the primary
		fallback     bool // a fallback model with a provider
		retriesSpent bool
		sideEffects  bool
		want         string
	}{
		{name: "success", o: outcome{kind: outSuccess}, want: "end: "},
		{name: "client left", o: outcome{kind: outCancelled}, want: "end: "},
		{name: "429, another provider", o: up(429, "rate_limit_exceeded"), alternates: 1, want: "→ primary@p1"},
		{name: "429, alone, retries left", o: up(429, "rate_limit_exceeded"), fallback: true, want: "→ primary@"},
		{name: "429, alone, retries spent", o: up(429, "rate_limit_exceeded"), fallback: true, retriesSpent: true, want: "→ backup@"},
		{name: "429, retries spent, no fallback", o: up(429, "rate_limit_exceeded"), retriesSpent: true, want: "end: 429"},
		{name: "429 after commit", o: up(429, "rate_limit_exceeded"), committed: true, alternates: 1, fallback: true, want: "end: in-band rate_limit_exceeded"},
		{name: "503, alone, retries spent, no fallback", o: up(503, ""), retriesSpent: true, want: "end: 503"},
		{name: "connect, side effects", o: outcome{kind: outTransport, providerID: "p1"}, alternates: 1, sideEffects: true, want: "end: 502"},
		{name: "stall, alone, fallback", o: stall(execution.HealthAvailable), fallback: true, want: "→ backup@ avoiding p1"},
		{name: "stall, another provider", o: stall(execution.HealthUnavailable), alternates: 1, fallback: true, want: "→ primary@ avoiding p1"},
		{name: "stall, alone, no fallback, available", o: stall(execution.HealthAvailable), want: "→ primary@ avoiding p1 (allowed)"},
		{name: "stall, alone, no fallback, unavailable", o: stall(execution.HealthUnavailable), want: "end: 504"},
		{name: "stall unconfirmed", o: outcome{kind: outStall, providerID: "p1", fenceSeen: true}, alternates: 1, want: "end: 504"},
		{name: "stall after commit", o: stall(execution.HealthAvailable), committed: true, alternates: 1, want: "end: in-band response_stalled"},
		{name: "edge backstop", o: outcome{kind: outTransport, providerID: "p1", cause: causeBackstop}, alternates: 1, want: "end: 504"},
		{name: "400", o: up(400, ""), alternates: 1, fallback: true, want: "end: 400"},
		{name: "context length", o: up(400, "context_length_exceeded"), alternates: 1, fallback: true, want: "→ backup@"},
		{name: "context length, no fallback", o: up(400, "context_length_exceeded"), alternates: 1, want: "end: 400"},
		{name: "content policy", o: up(400, "content_policy_violation"), alternates: 1, fallback: true, want: "end: 400"},
		{name: "shutdown", o: outcome{kind: outShutdown}, want: "end: 503"},
		{name: "filtered", o: outcome{kind: outFiltered}, want: "end: 400"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble.Test(t, func(t *testing.T) {
				if got := decideOnce(tt.o, tt.committed, tt.alternates, tt.fallback, tt.retriesSpent, tt.sideEffects); got != tt.want {
					t.Fatalf("next: %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// decideOnce runs one decision of a fresh runtime and describes it.
func decideOnce(o outcome, committed bool, alternates int, fallback, retriesSpent, sideEffects bool) string {
	d := &fakeDispatcher{candsFor: func(r DispatchRequest) Candidates {
		switch {
		case r.Model == "backup" && fallback:
			return Candidates{Alternates: 1}
		case r.Model == "primary" && !strings.Contains(strings.Join(r.Exclude, ","), "p2"):
			return Candidates{Alternates: alternates}
		}
		return Candidates{}
	}}
	cfg := Config{Dispatcher: d, Metrics: testMetrics}.WithDefaults()
	rec := httptest.NewRecorder()
	rt := &runtime{cfg: &cfg, resp: newResponder(rec, 0), obs: newRecoveryObserver(nil, testMetrics), models: []string{"backup"},
		req: &Request{Surface: surface.Chat, Stream: true, Model: "primary", Snapshot: []byte("{}"), SideEffects: sideEffects,
			RebuildForModel: func(m string) (Work, error) { return Work{}, nil }}}
	rt.cur = &attemptRun{rt: rt, enc: newEncoder(rt.req, "primary")}
	if committed {
		_ = rt.resp.write([]byte("data: {}\n\n"))
	}
	if retriesSpent {
		rt.modelRetries = 2
	}
	dreq := DispatchRequest{Model: "primary"}
	if !rt.next(context.Background(), &o, &dreq) {
		body := rec.Body.String()
		switch {
		case committed && strings.Contains(body, `"error"`):
			i := strings.Index(body, `"code":"`) + len(`"code":"`)
			return "end: in-band " + body[i:i+strings.IndexByte(body[i:], '"')]
		case rec.Code != 200 || body != "":
			return "end: " + strconv.Itoa(rec.Code)
		}
		return "end: "
	}
	dreq = rt.avoid.bind(dreq) // what the next dispatch asks for
	s := "→ " + dreq.Model + "@" + strings.Join(dreq.Exclude, ",")
	if dreq.AvoidProviderID != "" {
		s += " avoiding " + dreq.AvoidProviderID
		if dreq.AllowAvoidedProviderFallback && dreq.Model == "primary" && alternates == 0 {
			s += " (allowed)"
		}
	}
	return s
}

// TestQueueRefusalsAreNamed (issue 28): a full queue and a wait past
// queue.max_wait are different answers, each named.
func TestQueueRefusalsAreNamed(t *testing.T) {
	for err, code := range map[error]string{ErrQueueFull: "queue_full", ErrQueueTimeout: "queue_timeout", ErrNoProvider: "no_provider_available"} {
		if e := dispatchError(err); e.Code != code {
			t.Errorf("%v: %s, want %s", err, e.Code, code)
		}
	}
}
