package tenancy

import (
	"net/http"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

// TestTenantRequestsPerMinute: a burst of N, then one every 60/N s, with
// OpenAI's headers on every answer.
func TestTenantRequestsPerMinute(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	ts := New([]KeyConfig{{ID: "k", Limits: KeyLimits{RequestsPerMinute: 3}}}, clk.now)
	for i := range 3 {
		h := http.Header{}
		a, e := ts.Admit("k", "m", 0, h)
		if e != nil {
			t.Fatalf("request %d refused: %v", i+1, e.Message)
		}
		a.End(nil, false)
		if got, want := h.Get("X-Ratelimit-Remaining-Requests"), string(rune('0'+2-i)); got != want {
			t.Fatalf("remaining after %d: %q, want %q", i+1, got, want)
		}
	}
	h := http.Header{}
	if _, e := ts.Admit("k", "m", 0, h); e == nil || e.Status != 429 || e.Code != "rate_limit_exceeded" || e.Type != "requests" {
		t.Fatalf("the 4th request: %+v", e)
	}
	if h.Get("Retry-After") != "20" || h.Get("X-Ratelimit-Limit-Requests") != "3" || h.Get("X-Ratelimit-Reset-Requests") != "1m0s" {
		t.Fatalf("429 headers %v", h)
	}
	clk.t = clk.t.Add(20 * time.Second)
	if a, e := ts.Admit("k", "m", 0, http.Header{}); e != nil {
		t.Fatalf("after 60/N s: %v", e.Message)
	} else {
		a.End(nil, false)
	}
}

// TestTenantBudgetsAndTokens: tokens counted from reported usage against
// the daily budget (reset at 00:00 UTC) and the TPM bucket (an estimate
// reserved, settled with the real use); concurrency; allowed models.
func TestTenantBudgetsAndTokens(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)}
	ts := New([]KeyConfig{{ID: "k", Models: []string{"m"}, Limits: KeyLimits{TokensPerDay: 100, TokensPerMinute: 1000, Concurrent: 1}}}, clk.now)
	a, e := ts.Admit("k", "m", 10, http.Header{})
	if e != nil {
		t.Fatal(e.Message)
	}
	if _, e := ts.Admit("k", "m", 0, http.Header{}); e == nil || e.Code != "rate_limit_exceeded" {
		t.Fatalf("a second concurrent request: %+v", e)
	}
	a.End(&execution.TokenUsage{PromptTokens: 40, CompletionTokens: 60}, false)
	h := http.Header{}
	if _, e := ts.Admit("k", "m", 0, h); e == nil || e.Code != "insufficient_quota" || h.Get("Retry-After") != "60" {
		t.Fatalf("over the daily budget: %+v %v", e, h)
	}
	if _, e := ts.Admit("k", "other", 0, http.Header{}); e == nil || e.Status != 403 || e.Code != "model_not_allowed" {
		t.Fatalf("a model the key may not use: %+v", e)
	}
	clk.t = clk.t.Add(time.Minute) // a new UTC day
	h = http.Header{}
	a, e = ts.Admit("k", "m", 0, h)
	if e != nil {
		t.Fatalf("after the daily reset: %v", e.Message)
	}
	a.End(nil, false)
	if got := h.Get("X-Ratelimit-Remaining-Tokens"); got != "1000" {
		t.Fatalf("TPM bucket after a minute: %q", got)
	}
	st := ts.Status()
	if len(st) != 1 || st[0].Usage.Requests != 2 || st[0].Usage.PromptTokens != 40 || st[0].Today.Tokens != 0 || *st[0].RemainingDay != 100 {
		t.Fatalf("status %+v", st)
	}
}

// TestTenantReloadKeepsState: a key kept across a reload keeps its use; a
// removed key is forgotten.
func TestTenantReloadKeepsState(t *testing.T) {
	clk := &fakeNow{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	keys := []KeyConfig{{ID: "a", Limits: KeyLimits{RequestsPerMinute: 1}}, {ID: "b"}}
	ts := New(keys, clk.now)
	a, _ := ts.Admit("a", "m", 0, nil)
	a.End(nil, false)
	ts.Configure(keys[:1])
	if _, e := ts.Admit("a", "m", 0, nil); e == nil {
		t.Fatal("a reload refilled a kept key's bucket")
	}
	if st := ts.Status(); len(st) != 1 || st[0].Usage.Requests != 1 {
		t.Fatalf("status after reload %+v", st)
	}
}

// TestUsageFileSurvivesRestart: a key's usage and budget window saved and
// loaded by a new edge; a missing file is a first start.
func TestUsageFileSurvivesRestart(t *testing.T) {
	path := t.TempDir() + "/usage.json"
	clk := &fakeNow{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	keys := []KeyConfig{{ID: "k", Limits: KeyLimits{TokensPerDay: 100}}}
	first := New(keys, clk.now)
	if err := first.LoadUsage(path); err != nil {
		t.Fatal(err)
	}
	a, _ := first.Admit("k", "m", 0, nil)
	a.End(&execution.TokenUsage{PromptTokens: 30, CompletionTokens: 70}, false)
	if err := first.SaveUsage(path); err != nil {
		t.Fatal(err)
	}
	second := New(keys, clk.now)
	if err := second.LoadUsage(path); err != nil {
		t.Fatal(err)
	}
	if _, e := second.Admit("k", "m", 0, nil); e == nil || e.Code != "insufficient_quota" {
		t.Fatalf("the budget used before the restart was forgotten: %+v", e)
	}
	if st := second.Status(); st[0].Usage.CompletionTokens != 70 {
		t.Fatalf("usage after restart %+v", st[0].Usage)
	}
}

type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }
