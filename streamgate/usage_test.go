package streamgate

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/surface"
)

// TestEstimatePromptTokens: text at four bytes a token plus three per
// object, the model name not counted, an inline data: URL at a fixed
// image rate instead of its base64, and a body that is not JSON by bytes.
func TestEstimatePromptTokens(t *testing.T) {
	image := `data:image/png;base64,` + strings.Repeat("QUFB", 100000)
	for _, tt := range []struct {
		name string
		body string
		want int64
	}{
		{"one short message", `{"model":"a-very-long-model-name","messages":[{"role":"user","content":"hi"}]}`, 2 + 2*3},
		{"two messages", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]}`, 8 + 3*3},
		{"an image part", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + image + `"}}]}]}`,
			4 + 4*3 + 765},
		{"not JSON", strings.Repeat("x", 40), 10},
	} {
		if got := EstimatePromptTokens([]byte(tt.body)); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestEstimateUsage: the completion is the larger of the events that
// carried output and the output's bytes at four a token.
func TestEstimateUsage(t *testing.T) {
	for _, tt := range []struct {
		out  eventstream.Output
		want int64
	}{
		{eventstream.Output{Bytes: 12, Events: 12}, 12},  // a token an event
		{eventstream.Output{Bytes: 400, Events: 3}, 100}, // batched events
		{eventstream.Output{Bytes: 401}, 101},            // a whole body
		{eventstream.Output{}, 0},
	} {
		u := EstimateUsage(7, tt.out)
		if u.CompletionTokens != tt.want || u.PromptTokens != 7 || u.TotalTokens != 7+tt.want {
			t.Errorf("%+v: %+v, want completion %d", tt.out, u, tt.want)
		}
	}
}

// TestWhatIsCharged: an answer, whole or cut, is charged an estimate when
// no usage was reported; an error answer with no output is not.
func TestWhatIsCharged(t *testing.T) {
	for _, tt := range []struct {
		name    string
		items   []Item
		charged bool
	}{
		{"a whole answer", []Item{delta("hello there"), complete()}, true},
		{"a cut answer", []Item{delta("hello")}, true},
		{"an error answer", []Item{upstreamFail(400, "", 0)}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &fakeDispatcher{attempts: []*fakeAttempt{{provider: "n/a", items: tt.items}}}
			cfg := Config{Dispatcher: d, Metrics: testMetrics}.WithDefaults()
			sum := Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m", PromptEstimate: 7}, httptest.NewRecorder())
			if got := sum.Usage != nil && sum.UsageEstimated; got != tt.charged {
				t.Fatalf("charged %v (%+v), want %v", got, sum.Usage, tt.charged)
			}
		})
	}
}

// TestResumedUsageCountsEveryAttempt (issue 29): a stream cut after
// "Hello wor" (no usage reported) and continued by an attempt that
// reports its own is charged both: the continuation's usage plus an
// estimate of what the cut attempt delivered.
func TestResumedUsageCountsEveryAttempt(t *testing.T) {
	pol := DefaultRetryPolicy()
	pol.Resume = true
	w := &world{models: map[string][]string{"p": {"p1"}, "f": {"f1"}}, prefill: map[string]bool{"f1": true}}
	w.script = func(p string, _ int, _ DispatchRequest) *fakeAttempt {
		if p == "p1" {
			return &fakeAttempt{items: deltas("Hello", " wor")}
		}
		return &fakeAttempt{items: []Item{delta("ld."), ev(execution.RunEvent{Type: execution.EventTypeComplete,
			Usage: &execution.TokenUsage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}})}}
	}
	var sum *Summary
	bubble.Test(t, func(t *testing.T) {
		w.tries = map[string]int{}
		cfg := Config{Dispatcher: w, Metrics: testMetrics, Policy: func(string) RetryPolicy { return pol }}.WithDefaults()
		req := &Request{Surface: surface.Chat, Stream: true, Model: "p", Fallbacks: []string{"f"}, Snapshot: []byte("{}"),
			RebuildForModel: func(m string) (Work, error) { return Work{Run: &execution.RunRequest{Model: m}}, nil },
			Continue: func(m, prefix string) (Work, error) {
				return Work{Run: &execution.RunRequest{Model: m, Continuation: true, Messages: []execution.Message{{Role: "assistant", Content: prefix}}}}, nil
			}}
		sum = Serve(t.Context(), &cfg, req, httptest.NewRecorder())
	})
	// "Hello", " wor": 2 events, 9 bytes → 3 tokens estimated, plus the 2 reported.
	if u := sum.Usage; u == nil || !sum.UsageEstimated || u.CompletionTokens != 2+3 || u.PromptTokens != 10 || u.TotalTokens != 12+3 {
		t.Fatalf("usage %+v (estimated %v)", sum.Usage, sum.UsageEstimated)
	}
}

var estimateSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":["a",{"b":"c"} , "d"],"x":[{"y":"z"} , "w"],"n":[1,true,null,-2.5e3],"e":"\u00e9\n\"q\"","k\u0065y":"data:x"}`,
	`{"messages":[{"content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,QUFB"}}]}]}`,
	` { "a" : [ [ "x" ] , { } , [ ] ] , "model" : "gpt" } `, `{"a":"\"data:"}`, `{"a":"\u0064ata:x"}`,
	`{"model":"a","model":"b"}`, `[1,"two"]`, `not json`, ``, `{"a":`,
}

// TestEstimateOneReadMatchesParse: the estimate of a large body, read
// with jsonstrict, is the estimate fastjson's tree gives.
func TestEstimateOneReadMatchesParse(t *testing.T) {
	for _, s := range estimateSeeds {
		padded := []byte(s + strings.Repeat(" ", estimateWalkBytes+1))
		if got, want := EstimatePromptTokens(padded), estimateParsed(padded); got != want {
			t.Errorf("%s: %d, want %d", s, got, want)
		}
		checkedMatches(t, padded)
		checkedMatches(t, []byte(s))
	}
	big := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", estimateWalkBytes/6) + `"}]}`)
	if got, want := EstimatePromptTokens(big), estimateParsed(big); got != want {
		t.Errorf("a large message: %d, want %d", got, want)
	}
	checkedMatches(t, big)
}

func FuzzEstimateOneReadMatchesParse(f *testing.F) {
	for _, s := range estimateSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		padded := append(b, bytes.Repeat([]byte(" "), estimateWalkBytes+1)...)
		if got, want := EstimatePromptTokens(padded), estimateParsed(padded); got != want {
			t.Fatalf("%q: %d, want %d", b, got, want)
		}
		checkedMatches(t, padded)
		checkedMatches(t, b)
	})
}

// checkedMatches: of a body a surface's check accepts, the checked
// estimate is the estimate.
func checkedMatches(t *testing.T, body []byte) {
	t.Helper()
	if jsonstrict.Check(body, 0) != nil {
		return
	}
	if got, want := EstimateCheckedPromptTokens(body), estimateParsed(body); got != want {
		t.Errorf("%.80q checked: %d, want %d", body, got, want)
	}
}

// BenchmarkEstimateLargePrompt: a 1 MiB chat body's estimate, of a body
// not known to be JSON (checked first) and of one a surface checked.
func BenchmarkEstimateLargePrompt(b *testing.B) {
	benchmarkEstimate(b, []byte(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("lorem ipsum ", 1<<20/12)+`"}]}`))
}

// BenchmarkEstimateSmallPrompt: the same of a short chat request (the
// unchecked one read with the pooled parser, the checked one walked).
func BenchmarkEstimateSmallPrompt(b *testing.B) {
	benchmarkEstimate(b, []byte(`{"model":"m","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What is the capital of France?"}],"max_tokens":64}`))
}

func benchmarkEstimate(b *testing.B, body []byte) {
	for _, c := range []struct {
		name     string
		estimate func([]byte) int64
	}{{"unchecked", EstimatePromptTokens}, {"checked", EstimateCheckedPromptTokens}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if c.estimate(body) <= 0 {
					b.Fatal("no estimate")
				}
			}
		})
	}
}

// TestUnchargedIsNotCharged: a request whose answer is not usage (a
// stored response retrieved) is charged nothing, whether its upstream
// reported usage or not.
func TestUnchargedIsNotCharged(t *testing.T) {
	reported := complete()
	reported.Event.Usage = &execution.TokenUsage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	for _, items := range [][]Item{{delta("hello there"), complete()}, {delta("hello there"), reported}} {
		d := &fakeDispatcher{attempts: []*fakeAttempt{{provider: "n/a", items: items}}}
		cfg := Config{Dispatcher: d, Metrics: testMetrics}.WithDefaults()
		sum := Serve(t.Context(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m", PromptEstimate: 7, Uncharged: true}, httptest.NewRecorder())
		if sum.Usage != nil || sum.UsageEstimated || sum.Outcome != "ok" {
			t.Fatalf("charged %+v (%s)", sum.Usage, sum.Outcome)
		}
	}
}
