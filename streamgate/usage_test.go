package streamgate

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/codec/eventstream"
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
			sum := Serve(t.Context(), &cfg, &Request{Surface: SurfaceChat, Stream: true, Model: "m", PromptEstimate: 7}, httptest.NewRecorder())
			if got := sum.Usage != nil && sum.UsageEstimated; got != tt.charged {
				t.Fatalf("charged %v (%+v), want %v", got, sum.Usage, tt.charged)
			}
		})
	}
}
