package nodeagent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/clocktest"
	"github.com/iopgw/iop/nodeagent/providers/openai"
	"github.com/iopgw/iop/wire"
)

// shapes renders each message a recorder saw as its item types, e.g.
// "response_start+body" for a batch of two.
func shapes(ups []*wire.AttemptUp) []string {
	var out []string
	for _, m := range ups {
		var types []string
		for _, ev := range append(m.GetBatch().GetEvents(), m.GetEvent()) {
			if ev != nil {
				types = append(types, ev.GetType())
			}
		}
		for _, f := range append(m.GetBatch().GetFrames(), m.GetFrame()) {
			if f != nil {
				types = append(types, f.GetType())
			}
		}
		out = append(out, strings.Join(types, "+"))
	}
	return out
}

// sentMessages runs one attempt on a bridge and returns its messages.
// With a clock (inside a synctest bubble), the bridge runs on it and the
// clock is driven until the attempt ends; nil runs on the wall clock.
func sentMessages(t *testing.T, clk *clocktest.Manual, p *funcProvider, run func(b *Bridge, send func(*wire.AttemptUp) error)) []*wire.AttemptUp {
	t.Helper()
	var ups []*wire.AttemptUp
	for _, m := range sentMessagesAt(t, clk, p, run) {
		ups = append(ups, m.up)
	}
	return ups
}

func emitFrames(fs ...execution.ProviderTunnelFrame) func(context.Context, *execution.ProviderTunnelRequest, *execution.FrameEmitter) error {
	return func(_ context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
		for _, f := range fs {
			emit.Emit(f)
		}
		return nil
	}
}

func emitEvents(evs ...execution.RunEvent) func(context.Context, *execution.RunRequest, *execution.Emitter) error {
	return func(_ context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
		for _, ev := range evs {
			emit.Emit(ev)
		}
		return nil
	}
}

// TestCoalescedMessages: the items of an attempt go in as few messages as
// the edge's handling allows — a head with its first bytes, a whole body
// the edge buffers anyway, usage with the end — and a stream's bytes one
// read at a time, never held back.
func TestCoalescedMessages(t *testing.T) {
	head := func(ct string, status int) execution.ProviderTunnelFrame {
		return execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: status, Header: map[string][]string{"Content-Type": {ct}}}
	}
	body := execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("x")}
	usage := execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: &execution.TokenUsage{TotalTokens: 3}}
	end := execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}
	start := execution.RunEvent{Type: execution.EventTypeStart}
	delta := execution.RunEvent{Type: execution.EventTypeDelta, Delta: "tok"}
	evUsage := execution.RunEvent{Type: execution.EventTypeUsage, Usage: &execution.TokenUsage{TotalTokens: 3}}
	complete := execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: "stop"}
	for _, tc := range []struct {
		name string
		p    *funcProvider
		run  func(b *Bridge, send func(*wire.AttemptUp) error)
		want []string
	}{
		{"tunnel JSON: one message", &funcProvider{tunnel: emitFrames(head("application/json", 200), body, body, usage, end)}, runTunnel,
			[]string{"response_start+body+body+usage+end"}},
		{"tunnel error status: one message", &funcProvider{tunnel: emitFrames(head("text/event-stream", 429), body, end)}, runTunnel,
			[]string{"response_start+body+end"}},
		{"tunnel stream: the head with the first bytes, then each read", &funcProvider{tunnel: emitFrames(head("text/event-stream", 200), body, body, body, usage, end)}, runTunnel,
			[]string{"response_start+body", "body", "body", "usage+end"}},
		{"normalized stream: start with the first delta, usage with the end", &funcProvider{exec: emitEvents(start, delta, delta, evUsage, complete)}, runStream(true),
			[]string{"start+delta", "delta", "usage+complete"}},
		{"normalized non-stream: the first delta at once, the rest with the end", &funcProvider{exec: emitEvents(start, delta, delta, delta, evUsage, complete)}, runStream(false),
			[]string{"start+delta", "delta+delta+usage+complete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shapes(sentMessages(t, nil, tc.p, tc.run)); !slices.Equal(got, tc.want) {
				t.Fatalf("messages %q, want %q", got, tc.want)
			}
		})
	}
}

func runTunnel(b *Bridge, send func(*wire.AttemptUp) error) {
	b.Tunnel(context.Background(), nil, &wire.ProviderTunnelRequest{RunId: "r", AttemptId: "a", ProviderId: "p1", Model: "llama3.2"}, send)
}

func runStream(stream bool) func(*Bridge, func(*wire.AttemptUp) error) {
	return func(b *Bridge, send func(*wire.AttemptUp) error) {
		req := runReq(0)
		req.Stream = stream
		b.Run(context.Background(), nil, req, send)
	}
}

// TestHeldItemsBounded: held items go out once they are a second old
// (checked as the next item comes), and a watchdog's terminal carries
// whatever was held: a head held while the upstream went silent reaches
// the edge with the stall terminal, in order.
func TestHeldItemsBounded(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		slow := &funcProvider{exec: func(_ context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "first"})
			for range 5 {
				pause(clk, 400*time.Millisecond)
				emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "tok"})
			}
			emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete})
			return nil
		}}
		got := shapes(sentMessages(t, clk, slow, runStream(false)))
		// held from 0.4 s, out by its age bound at 1.4 s; held again from
		// 1.6 s until the end at 2.0 s
		want := []string{"delta", "delta+delta+delta", "delta+delta+complete"}
		if !slices.Equal(got, want) {
			t.Fatalf("messages %q, want %q", got, want)
		}

		silent := &funcProvider{tunnel: func(ctx context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200,
				Header: map[string][]string{"Content-Type": {"text/event-stream"}}})
			<-ctx.Done()
			return ctx.Err()
		}}
		got = shapes(sentMessages(t, clk, silent, func(b *Bridge, send func(*wire.AttemptUp) error) {
			b.Tunnel(context.Background(), nil, &wire.ProviderTunnelRequest{RunId: "r", AttemptId: "a", ProviderId: "p1", Model: "llama3.2",
				ResponseStallTimeoutMs: 5000}, send)
		}))
		// the head leaves by its age bound although no body follows
		if !slices.Equal(got, []string{"response_start", "error"}) {
			t.Fatalf("stalled tunnel sent %q", got)
		}
	})
}

// TestOneReadOneMessage: with a real upstream, what one read of its body
// produced goes to the edge as one message, sent before the provider
// waits for the next read — the events of a burst together, a slow
// token on its own, never held across a wait.
func TestOneReadOneMessage(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(content string) string {
			return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n"
		}
		_, _ = io.WriteString(w, chunk("a")+chunk("b")+chunk("c")) // a burst: one read
		_ = http.NewResponseController(w).Flush()
		<-release // the next token is slow
		_, _ = io.WriteString(w, chunk("d"))
		_ = http.NewResponseController(w).Flush()
		<-release
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	p := openai.New(openai.Config{BaseURL: up.URL + "/v1"})
	env := newBridgeEnv(t, p, DefaultCloseGrace, nil)
	sent := make(chan *wire.AttemptUp, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := runReq(0)
		req.Stream = true
		env.bridge.Run(context.Background(), nil, req, func(m *wire.AttemptUp) error { sent <- m; return nil })
	}()
	next := func() string {
		select {
		case m := <-sent:
			return shapes([]*wire.AttemptUp{m})[0]
		case <-time.After(5 * time.Second):
			t.Fatal("no message: something was held across a wait")
			return ""
		}
	}
	if got := next(); got != "start+start+delta+delta+delta" {
		t.Fatalf("first read went as %q", got)
	}
	release <- struct{}{}
	if got := next(); got != "delta" {
		t.Fatalf("the slow token went as %q", got)
	}
	close(release)
	if got := next(); got != "complete" {
		t.Fatalf("the end went as %q", got)
	}
	<-done
}

// TestHeldProgressLeavesByItsAgeBound guards the contract's "the Node
// watchdog ... resets only on the documented progress dispositions" from
// the edge's side (issue 32, finding 2): progress the node holds for
// coalescing — a tunnel's response_start, a non-streamed answer's later
// deltas — reaches the edge within maxHeldAge even when the provider then
// stays silent for most of its stall timeout, so the edge's backstop
// (stall timeout + margin) never cuts an attempt the watchdog saw
// progressing. Fake time: the gaps are the 250 s and 299 s seen.
func TestHeldProgressLeavesByItsAgeBound(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		gap := 299 * time.Second
		head := &funcProvider{tunnel: func(ctx context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
			emit.Emit(sseStart())
			pause(clk, gap)
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: {}\n\n")})
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
			return nil
		}}
		at := timedMessages(t, clk, head, runTunnel) // the default stall timeout: 300 s
		if len(at) == 0 || at[0].shape != "response_start" || at[0].after > maxHeldAge {
			t.Fatalf("tunnel messages %+v: the head must leave within %v", at, maxHeldAge)
		}

		gap = 250 * time.Second
		whole := &funcProvider{exec: func(_ context.Context, _ *execution.RunRequest, emit *execution.Emitter) error {
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "first"})
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "second"})
			pause(clk, gap)
			emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete})
			return nil
		}}
		at = timedMessages(t, clk, whole, runStream(false))
		if len(at) != 3 || at[1].shape != "delta" || at[1].after > maxHeldAge || at[2].shape != "complete" {
			t.Fatalf("non-stream messages %+v: the held delta must leave within %v", at, maxHeldAge)
		}
	})
}

// TestAgeTimerFollowsTheYoungerHold: the age timer stays pending when a
// read or an item sends what is held; a later hold made before it fires
// leaves at its own age bound — not early at the timer set for the hold
// that already went, and never later than its bound.
func TestAgeTimerFollowsTheYoungerHold(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		clk := clocktest.New()
		later := 900 * time.Millisecond
		p := &funcProvider{tunnel: func(ctx context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
			// The head is held (the timer is set); the body sends both.
			emit.Emit(sseStart())
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: {}\n\n")})
			pause(clk, later)
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: &execution.TokenUsage{TotalTokens: 3}}) // held
			pause(clk, 250*time.Second)
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
			return nil
		}}
		at := timedMessages(t, clk, p, runTunnel)
		want := []timedMessage{{"response_start+body", 0}, {"usage", later + maxHeldAge}, {"end", later + 250*time.Second}}
		if !slices.Equal(at, want) {
			t.Fatalf("messages %+v, want %+v", at, want)
		}
	})
}

// sseStart is the response_start of a 200 event stream.
func sseStart() execution.ProviderTunnelFrame {
	return execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200,
		Header: map[string][]string{"Content-Type": {"text/event-stream"}}}
}

type timedMessage struct {
	shape string
	after time.Duration // since the attempt started
}

// timedMessages is sentMessages with each message's send time on clk.
func timedMessages(t *testing.T, clk *clocktest.Manual, p *funcProvider, run func(b *Bridge, send func(*wire.AttemptUp) error)) []timedMessage {
	t.Helper()
	start := clk.Now()
	var out []timedMessage
	for _, m := range sentMessagesAt(t, clk, p, run) {
		out = append(out, timedMessage{shape: shapes([]*wire.AttemptUp{m.up})[0], after: m.at.Sub(start)})
	}
	return out
}

type sentAt struct {
	up *wire.AttemptUp
	at time.Time
}

func sentMessagesAt(t *testing.T, clk *clocktest.Manual, p *funcProvider, run func(b *Bridge, send func(*wire.AttemptUp) error)) []sentAt {
	t.Helper()
	var c clock.Clock
	attempt := func(f func()) { f() }
	if clk != nil {
		c, attempt = clk, func(f func()) { clk.Drive(t, f) }
	}
	env := newBridgeEnv(t, p, DefaultCloseGrace, c)
	var ups []sentAt
	attempt(func() {
		run(env.bridge, func(m *wire.AttemptUp) error { ups = append(ups, sentAt{m, clock.Or(c).Now()}); return nil })
	})
	return ups
}

// A batch the edge was handed keeps its items while the coalescer holds
// and sends the next ones in the same room; and a room that sent its
// items keeps none of them.
func TestBatchesKeepTheirItems(t *testing.T) {
	var c coalescer
	f := func(body string) *wire.ProviderTunnelFrame {
		return &wire.ProviderTunnelFrame{Type: string(execution.FrameTypeBody), Body: []byte(body)}
	}
	bodies := func(m *wire.AttemptUp) (out []string) {
		if fr := m.GetFrame(); fr != nil {
			return []string{string(fr.GetBody())}
		}
		for _, fr := range m.GetBatch().GetFrames() {
			out = append(out, string(fr.GetBody()))
		}
		return out
	}
	c.holdFrame(f("a"))
	c.holdFrame(f("b"))
	first := c.take()
	for _, b := range []string{"c", "d", "e", "f", "g"} { // past the room's four
		c.holdFrame(f(b))
	}
	second := c.take()
	c.holdFrame(f("h"))
	third := c.take()
	if got := bodies(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first batch after later holds: %q", got)
	}
	if got := bodies(second); !slices.Equal(got, []string{"c", "d", "e", "f", "g"}) {
		t.Fatalf("second batch: %q", got)
	}
	if got := bodies(third); !slices.Equal(got, []string{"h"}) {
		t.Fatalf("single item: %q", got)
	}
	if c.take() != nil {
		t.Fatal("an empty coalescer made a message")
	}
	for i, fr := range c.frameBuf {
		if fr != nil {
			t.Fatalf("the room keeps item %d after it went", i)
		}
	}
	ev := &wire.RunEvent{Type: string(execution.EventTypeDelta), Delta: "x"}
	c.holdEvent(ev)
	c.holdEvent(ev)
	if got := c.take().GetBatch().GetEvents(); len(got) != 2 || got[0] != ev {
		t.Fatalf("event batch: %v", got)
	}
	if c.eventBuf[0] != nil {
		t.Fatal("the event room keeps an event after it went")
	}
}
