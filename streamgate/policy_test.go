package streamgate

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/surface"
)

// world is a fake fleet for policy tests: models served by providers,
// each provider answering its n-th attempt (1-based) with a script. It
// honours Exclude, AvoidProviderID and Prefill as the pool does.
type world struct {
	models  map[string][]string // model → provider ids, in preference order
	prefill map[string]bool     // providers that continue a prefill
	script  func(provider string, n int, r DispatchRequest) *fakeAttempt

	mu    sync.Mutex
	tries map[string]int
	log   []string // "model@provider+elapsed", in order
	t0    time.Time
}

func (w *world) eligible(r DispatchRequest) (out []string, avoided bool) {
	for _, p := range w.models[r.Model] {
		switch {
		case slices.Contains(r.Exclude, p), r.Prefill && !w.prefill[p]:
		case p == r.AvoidProviderID:
			avoided = true
		default:
			out = append(out, p)
		}
	}
	if len(out) == 0 && avoided && r.AllowAvoidedProviderFallback {
		out = append(out, r.AvoidProviderID)
	}
	return out, avoided
}

func (w *world) Dispatch(_ context.Context, r DispatchRequest) (Attempt, error) {
	ps, _ := w.eligible(r)
	if len(ps) == 0 {
		return nil, ErrNoProvider
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := ps[0]
	w.tries[p]++
	w.log = append(w.log, fmt.Sprintf("%s@%s+%s", r.Model, p, time.Since(w.t0).Round(100*time.Millisecond)))
	a := w.script(p, w.tries[p], r)
	a.provider, a.closed = p, make(chan struct{})
	return a, nil
}

func (w *world) Candidates(r DispatchRequest) Candidates {
	ps, avoided := w.eligible(DispatchRequest{Model: r.Model, Exclude: r.Exclude, AvoidProviderID: r.AvoidProviderID, Prefill: r.Prefill})
	return Candidates{Alternates: len(ps), AvoidedOnly: len(ps) == 0 && avoided}
}

// targetsOf is a world's dispatch log without the times: "model@provider".
func targetsOf(log []string) []string {
	out := make([]string, 0, len(log))
	for _, l := range log {
		out = append(out, l[:strings.IndexByte(l, '+')])
	}
	return out
}

func upstreamFail(status int, code string, retryAfterMS int64) Item {
	u := &execution.UpstreamError{Status: status, Code: code, Message: "upstream says no", RetryAfterMS: retryAfterMS}
	return ev(execution.RunEvent{Type: execution.EventTypeError, Error: u.Message, Failure: execution.UpstreamFailure(u)})
}

func answer(text string) *fakeAttempt {
	return &fakeAttempt{items: []Item{delta(text), complete()}}
}

// policyRun serves one streaming chat request for model "p" (fallback
// "f") in a synctest bubble and returns the dispatch log, the client's
// body and the fake time it took.
func policyRun(t *testing.T, w *world, pol RetryPolicy) (log []string, body string, took time.Duration) {
	t.Helper()
	bubble.Test(t, func(t *testing.T) {
		w.tries, w.t0 = map[string]int{}, time.Now()
		cfg := Config{Dispatcher: w, Policy: func(string) RetryPolicy { return pol }}.WithDefaults()
		req := &Request{Surface: surface.Chat, Stream: true, Model: "p", Fallbacks: []string{"f"}, Snapshot: []byte("{}"),
			RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil },
			Continue: func(m, prefix string) (Work, error) {
				return Work{Run: &execution.RunRequest{Model: m, Continuation: true,
					Messages: []execution.Message{{Role: "assistant", Content: prefix}}}}, nil
			}}
		rec := httptest.NewRecorder()
		Serve(t.Context(), &cfg, req, rec)
		took, body, log = time.Since(w.t0), rec.Body.String(), w.log
	})
	return log, body, took
}

// TestRetryPolicyScenarios is the failover table with the default policy
// (2 retries, 500 ms doubling, Retry-After up to 10 s): one provider per
// model, one provider serving both, two providers for the primary. Time is
// fake; the bounds allow for the backoff's jitter.
func TestRetryPolicyScenarios(t *testing.T) {
	ok := func(string, int) *fakeAttempt { return answer("fine") }
	always := func(it Item) func(string, int) *fakeAttempt {
		return func(string, int) *fakeAttempt { return &fakeAttempt{items: []Item{it}} }
	}
	once := func(it Item) func(string, int) *fakeAttempt {
		return func(_ string, n int) *fakeAttempt {
			if n == 1 {
				return &fakeAttempt{items: []Item{it}}
			}
			return answer("fine")
		}
	}
	silentFor := func(d time.Duration) func(string, int) *fakeAttempt {
		return func(string, int) *fakeAttempt {
			return &fakeAttempt{delay: d, items: []Item{delta("late"), complete()}}
		}
	}
	ftt := DefaultRetryPolicy()
	ftt.FirstTokenTimeout = time.Second
	contentFB := DefaultRetryPolicy()
	contentFB.FallbackOnContentPolicy = true
	tests := []struct {
		name        string
		primary     func(p string, n int) *fakeAttempt
		pol         RetryPolicy
		want        string // the dispatch log without times
		body        string // in the client's body
		minT, maxT  time.Duration
		twoPrimary  bool
		sharedAlone bool // one provider serves both models
	}{
		{name: "429 with Retry-After", primary: always(upstreamFail(429, "rate_limit_exceeded", 20)),
			want: "p@p1 p@p1 p@p1 f@f1", body: "fine", minT: 2250 * time.Millisecond, maxT: 3 * time.Second},
		{name: "429 without Retry-After", primary: always(upstreamFail(429, "rate_limit_exceeded", 0)),
			want: "p@p1 p@p1 p@p1 f@f1", body: "fine", minT: 2250 * time.Millisecond, maxT: 3 * time.Second},
		{name: "429 Retry-After past the bound", primary: always(upstreamFail(429, "rate_limit_exceeded", 30_000)),
			want: "p@p1 f@f1", body: "fine", maxT: 0},
		{name: "500 once", primary: once(upstreamFail(500, "", 0)), want: "p@p1 p@p1", body: "fine",
			minT: 375 * time.Millisecond, maxT: 500 * time.Millisecond},
		{name: "503 always", primary: always(upstreamFail(503, "server_is_overloaded", 0)),
			want: "p@p1 p@p1 p@p1 f@f1", body: "fine", minT: 1125 * time.Millisecond, maxT: 1500 * time.Millisecond},
		{name: "503 always, two primaries", primary: always(upstreamFail(503, "", 0)), twoPrimary: true,
			want: "p@p1 p@p2 p@p2 f@f1", body: "fine", minT: 750 * time.Millisecond, maxT: time.Second},
		{name: "503 always, one provider for both", primary: always(upstreamFail(503, "", 0)), sharedAlone: true,
			want: "p@s p@s p@s f@s", body: "fine", minT: 1125 * time.Millisecond, maxT: 1500 * time.Millisecond},
		{name: "stall before the first byte", primary: always(stallItem(true, "available")),
			want: "p@p1 f@f1", body: "fine"},
		{name: "first token slow, no limit", primary: silentFor(20 * time.Second),
			want: "p@p1", body: "late", minT: 40 * time.Second, maxT: 40 * time.Second}, // 20 s before each item
		// A first-token timeout is evidence that the target is silent now:
		// the fallback first, at once (issue 29).
		{name: "first token slow, 1s limit", primary: silentFor(20 * time.Second), pol: ftt,
			want: "p@p1 f@f1", body: "fine", minT: time.Second, maxT: time.Second},
		{name: "first token slow, 1s limit, two primaries", primary: silentFor(20 * time.Second), pol: ftt, twoPrimary: true,
			want: "p@p1 p@p2 f@f1", body: "fine", minT: 2 * time.Second, maxT: 2 * time.Second},
		{name: "first token slow, 1s limit, one provider for both", primary: silentFor(20 * time.Second), pol: ftt, sharedAlone: true,
			want: "p@s f@s", body: "fine", minT: time.Second, maxT: time.Second},
		{name: "context length", primary: always(upstreamFail(400, "context_length_exceeded", 0)),
			want: "p@p1 f@f1", body: "fine"},
		{name: "content policy", primary: always(upstreamFail(400, "content_policy_violation", 0)),
			want: "p@p1", body: "upstream says no"},
		{name: "content policy, fallback on", primary: always(upstreamFail(400, "content_policy_violation", 0)), pol: contentFB,
			want: "p@p1 f@f1", body: "fine"},
		{name: "other 4xx", primary: always(upstreamFail(422, "", 0)), want: "p@p1", body: "upstream says no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{models: map[string][]string{"p": {"p1"}, "f": {"f1"}}}
			if tt.twoPrimary {
				w.models["p"] = []string{"p1", "p2"}
			}
			if tt.sharedAlone {
				w.models = map[string][]string{"p": {"s"}, "f": {"s"}}
			}
			w.script = func(p string, n int, r DispatchRequest) *fakeAttempt {
				if strings.HasPrefix(p, "f") || (p == "s" && r.Model == "f") {
					return ok(p, n)
				}
				return tt.primary(p, n)
			}
			pol := tt.pol
			if pol == (RetryPolicy{}) {
				pol = DefaultRetryPolicy()
			}
			log, body, took := policyRun(t, w, pol)
			got := targetsOf(log)
			if strings.Join(got, " ") != tt.want {
				t.Errorf("dispatches %v, want %s", log, tt.want)
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("client got %q, want it to contain %q", body, tt.body)
			}
			if took < tt.minT || took > tt.maxT {
				t.Errorf("took %v, want %v..%v (%v)", took, tt.minT, tt.maxT, log)
			}
		})
	}
}

// TestStallWithoutFallbackUsesEvidence: a stall with nowhere else to go
// retries the same provider only on exact available evidence.
func TestStallWithoutFallbackUsesEvidence(t *testing.T) {
	for _, tt := range []struct{ health, want, body string }{
		{"available", "p@p1 p@p1", "fine"},
		{"unavailable", "p@p1", "response_stalled"},
	} {
		t.Run(tt.health, func(t *testing.T) {
			w := &world{models: map[string][]string{"p": {"p1"}}}
			w.script = func(_ string, n int, _ DispatchRequest) *fakeAttempt {
				if n == 1 {
					return &fakeAttempt{items: []Item{stallItem(true, tt.health)}}
				}
				return answer("fine")
			}
			log, body, _ := policyRun(t, w, DefaultRetryPolicy())
			if len(log) != len(strings.Fields(tt.want)) || !strings.Contains(body, tt.body) {
				t.Fatalf("dispatches %v, client %q", log, body)
			}
		})
	}
}

// TestResume: a committed stream cut after "Hello" continues on a
// prefill-capable provider: the client reads every byte once, the
// continuation asked with the prefix; a provider that refuses the prefill
// is skipped; with none able to continue the client gets the cut's own
// terminal, never the refusal.
func TestResume(t *testing.T) {
	cut := &fakeAttempt{items: []Item{delta("Hello"), delta(" wor")}}
	resumeOn := DefaultRetryPolicy()
	resumeOn.Resume = true
	noSplice := resumeOn
	noSplice.NoSplice = true
	for _, tt := range []struct {
		name      string
		prefill   map[string]bool
		pol       RetryPolicy
		want      string
		body      []string
		notInBody []string
	}{
		{name: "resume off", prefill: map[string]bool{"f1": true}, pol: DefaultRetryPolicy(), want: "p@p1",
			body: []string{"Hello", " wor", "upstream_error"}, notInBody: []string{"[DONE]"}},
		{name: "continued on the fallback", prefill: map[string]bool{"f1": true}, pol: resumeOn, want: "p@p1 f@f1",
			body: []string{`"content":"Hello"`, `"content":" wor"`, `"content":"ld."`, "[DONE]"}, notInBody: []string{"upstream_error", "Hello world"}},
		{name: "refusal skipped", prefill: map[string]bool{"f1": true, "f2": true}, pol: resumeOn, want: "p@p1 f@f1 f@f2",
			body: []string{`"content":"ld."`, "[DONE]"}, notInBody: []string{"prefill"}},
		{name: "nothing continues (splice off)", prefill: map[string]bool{"f1": true}, pol: noSplice, want: "p@p1 f@f1",
			body: []string{"upstream_error"}, notInBody: []string{"[DONE]", "prefill"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{models: map[string][]string{"p": {"p1"}, "f": {"f1", "f2"}}, prefill: tt.prefill}
			refuseF1 := tt.name != "continued on the fallback"
			var prefixes []string
			w.script = func(p string, _ int, r DispatchRequest) *fakeAttempt {
				run := r.Work.Run
				if p == "p1" {
					return &fakeAttempt{items: slices.Clone(cut.items)}
				}
				if run != nil && run.Continuation {
					prefixes = append(prefixes, run.Messages[len(run.Messages)-1].Content)
				}
				if p == "f1" && refuseF1 {
					u := &execution.UpstreamError{Status: 400, Message: "assistant prefill is not supported"}
					return &fakeAttempt{items: []Item{ev(execution.RunEvent{Type: execution.EventTypeError, Failure: execution.UpstreamFailure(u)})}}
				}
				return &fakeAttempt{items: []Item{ev(execution.RunEvent{Type: execution.EventTypeStart, ResponseID: "other"}), delta("ld."), complete()}}
			}
			log, body, _ := policyRun(t, w, tt.pol)
			got := targetsOf(log)
			if strings.Join(got, " ") != tt.want {
				t.Errorf("dispatches %v, want %s", log, tt.want)
			}
			for _, s := range tt.body {
				if !strings.Contains(body, s) {
					t.Errorf("client body lacks %q:\n%s", s, body)
				}
			}
			for _, s := range tt.notInBody {
				if strings.Contains(body, s) {
					t.Errorf("client body has %q:\n%s", s, body)
				}
			}
			for _, p := range prefixes {
				if p != "Hello wor" {
					t.Errorf("continuation prefix %q", p)
				}
			}
			if strings.Contains(body, `"id":"other"`) {
				t.Error("the continuation changed the stream's id")
			}
		})
	}
}
