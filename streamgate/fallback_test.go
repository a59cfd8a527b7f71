package streamgate

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// TestPreCommitStallMovesToTheFallbackModel: a provider that stalls
// before the first byte, with no other provider of its model, hands the
// request to the next fallback model — even when its probe says it is
// available — still avoiding the stalled provider there.
func TestPreCommitStallMovesToTheFallbackModel(t *testing.T) {
	for _, health := range []string{"available", "unavailable"} {
		t.Run(health, func(t *testing.T) {
			d := &fakeDispatcher{attempts: []*fakeAttempt{
				{provider: "n/a", items: []Item{stallItem(true, health)}},
				{provider: "n/b", items: []Item{delta("from the fallback"), complete()}},
			}}
			d.candsFor = func(r DispatchRequest) Candidates {
				if r.Model == "primary" {
					return Candidates{AvoidedOnly: true}
				}
				return Candidates{Alternates: 1}
			}
			req := &Request{Surface: surface.Chat, Stream: true, Model: "primary", Fallbacks: []string{"backup"}, Snapshot: []byte("{}"),
				RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil }}
			w := serve(t, d, req, nil)
			if len(d.requests) != 2 || d.requests[1].Model != "backup" || d.requests[1].AvoidProviderID != "n/a" {
				t.Fatalf("dispatches %+v", d.requests)
			}
			if w.Code != 200 || !strings.Contains(w.Body.String(), "from the fallback") || !strings.Contains(w.Body.String(), "[DONE]") {
				t.Fatalf("client got %d %q", w.Code, w.Body.String())
			}
		})
	}
}

// TestFailedProvidersAreASet: each provider that failed the request is
// excluded from then on, so a model with several providers is tried
// through once each and then falls back — it never cycles among them.
func TestFailedProvidersAreASet(t *testing.T) {
	fail500 := func(p string) *fakeAttempt {
		return &fakeAttempt{provider: p, items: []Item{ev(execution.RunEvent{Type: execution.EventTypeError, Error: "boom",
			Failure: execution.UpstreamFailure(&execution.UpstreamError{Status: 500, Message: "boom"})})}}
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{fail500("n/a"), fail500("n/b"), fail500("n/c"),
		{provider: "n/f", items: []Item{delta("fallback answer"), complete()}}}}
	d.candsFor = func(r DispatchRequest) Candidates {
		if r.Model == "primary" {
			return Candidates{Alternates: 3 - len(r.Exclude)}
		}
		return Candidates{Alternates: 1}
	}
	cfg := Config{Dispatcher: d, MaxAttempts: 5}.WithDefaults()
	w := httptest.NewRecorder()
	Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "primary", Fallbacks: []string{"backup"}, Snapshot: []byte("{}"),
		RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil }}, w)
	var got []string
	for _, r := range d.requests {
		got = append(got, r.Model+strings.Join(r.Exclude, ","))
	}
	if strings.Join(got, " ") != "primary primaryn/a primaryn/a,n/b backup" {
		t.Fatalf("dispatches %v", got)
	}
	if w.Code != 200 || !strings.Contains(w.Body.String(), "fallback answer") {
		t.Fatalf("client got %d %q", w.Code, w.Body.String())
	}
}
