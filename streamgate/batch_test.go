package streamgate

import (
	"bytes"
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/surface"
)

// flushRecorder records how much of the body had been written at each
// flush.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushes []int
}

func (w *flushRecorder) Flush() {
	w.flushes = append(w.flushes, w.Body.Len())
	w.ResponseRecorder.Flush()
}

// TestABatchIsFlushedOnce: the items of one message (Batched.More) are
// written without a flush between them and flushed once, after the last
// — also when the last writes nothing (a usage frame) — and every byte
// arrives in order; items that came alone are each flushed at once.
func TestABatchIsFlushedOnce(t *testing.T) {
	sse := func(s string) Item {
		return frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: " + s + "\n\n")})
	}
	hdr := map[string][]string{"Content-Type": {"text/event-stream"}}
	items := []Item{
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200, Header: hdr}),
		sse(`{"choices":[{"delta":{"content":"a"}}]}`), // message 1: start + first event
		sse(`{"choices":[{"delta":{"content":"b"}}]}`), // message 2: three events
		sse(`{"choices":[{"delta":{"content":"c"}}]}`),
		sse(`{"choices":[{"delta":{"content":"d"}}]}`),
		sse(`{"choices":[{"delta":{"content":"e"}}]}`), // message 3: an event and usage
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: &execution.TokenUsage{PromptTokens: 1, CompletionTokens: 5}}),
		sse(`[DONE]`), // message 4: the last event and the end
		frame(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}),
	}
	held := []bool{true, false, true, true, false, true, false, true, false}
	var want []byte
	var cuts []int // the body's length at the end of each message
	for i, it := range items {
		if it.Frame.Type == execution.FrameTypeBody {
			want = append(want, it.Frame.Body...)
		}
		if !held[i] && i < len(items)-1 {
			cuts = append(cuts, len(want))
		}
	}
	d := &fakeDispatcher{attempts: []*fakeAttempt{{kind: KindFrames, provider: "n/a", items: items, held: held}}}
	cfg := Config{Dispatcher: d, Metrics: testMetrics}.WithDefaults()
	w := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
	Serve(context.Background(), &cfg, &Request{Surface: surface.Chat, Stream: true, Model: "m", Snapshot: []byte(`{"model":"m","stream":true}`)}, w)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatalf("%d, body %q, want %q", w.Code, w.Body.Bytes(), want)
	}
	// The first event is held until it is whole (firstEvent), then each
	// message's bytes are flushed once; the end flushes what the last
	// message left, if anything.
	got := slices.Compact(w.flushes)
	if len(got) < len(cuts) || !slices.Equal(got[:len(cuts)], cuts) {
		t.Fatalf("flushed at body lengths %v, want one flush per message at %v", w.flushes, cuts)
	}
}
