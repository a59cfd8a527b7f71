package execution

import (
	"fmt"
	"sync"
	"testing"
)

func TestEmitterOrderAndSingleTerminal(t *testing.T) {
	var got []RunEvent
	e := NewEmitter(func(ev RunEvent) { got = append(got, ev) })
	seq := []RunEvent{
		{Type: EventTypeStart},
		{Type: EventTypeDelta, Delta: "a"},
		{Type: EventTypeDelta, Delta: "b"},
		{Type: EventTypeComplete, FinishReason: "stop"},
	}
	for _, ev := range seq {
		if !e.Emit(ev) {
			t.Fatalf("Emit(%v) dropped before the terminal", ev.Type)
		}
	}
	for _, late := range []RunEvent{{Type: EventTypeDelta, Delta: "late"}, {Type: EventTypeError, Error: "x"}, {Type: EventTypeCancelled}} {
		if e.Emit(late) {
			t.Fatalf("Emit(%v) after terminal was delivered", late.Type)
		}
	}
	if len(got) != 4 || got[1].Delta != "a" || got[2].Delta != "b" || got[3].Type != EventTypeComplete {
		t.Fatalf("delivered %+v", got)
	}
	select {
	case <-e.Done():
	default:
		t.Fatal("Done not closed after the terminal")
	}
	if term, ok := e.Terminal(); !ok || term.FinishReason != "stop" {
		t.Fatalf("Terminal() = %+v, %v", term, ok)
	}
}

// TestEmitterConcurrentTerminalRace has 1,000 goroutines race their events
// and a terminal each through one emitter: exactly one terminal is delivered,
// every goroutine's events arrive in its own order, and nothing follows the
// terminal.
func TestEmitterConcurrentTerminalRace(t *testing.T) {
	const workers, perWorker = 1000, 5
	var mu sync.Mutex // the sink is serialized; the mutex only satisfies the reader below
	var delivered []RunEvent
	e := NewEmitter(func(ev RunEvent) {
		mu.Lock()
		delivered = append(delivered, ev)
		mu.Unlock()
	})
	terminals := []EventType{EventTypeComplete, EventTypeError, EventTypeCancelled}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range perWorker {
				e.Emit(RunEvent{Type: EventTypeDelta, Delta: fmt.Sprintf("%d:%d", w, i)})
			}
			e.Emit(RunEvent{Type: terminals[w%3], Error: fmt.Sprint(w)})
		})
	}
	close(start)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	nTerm, termAt := 0, -1
	next := make(map[int]int)
	for i, ev := range delivered {
		if ev.Type.IsTerminal() {
			nTerm++
			termAt = i
			continue
		}
		var w, n int
		if _, err := fmt.Sscanf(ev.Delta, "%d:%d", &w, &n); err != nil {
			t.Fatalf("bad delta %q", ev.Delta)
		}
		if n != next[w] {
			t.Fatalf("worker %d: got event %d, want %d (order broken)", w, n, next[w])
		}
		next[w]++
	}
	if nTerm != 1 {
		t.Fatalf("%d terminals delivered, want exactly 1", nTerm)
	}
	if termAt != len(delivered)-1 {
		t.Fatalf("terminal at %d of %d: events delivered after the terminal", termAt, len(delivered))
	}
}

func TestEmitterClaimFencesEveryoneElse(t *testing.T) {
	var got []RunEvent
	e := NewEmitter(func(ev RunEvent) { got = append(got, ev) })
	e.Emit(RunEvent{Type: EventTypeDelta, Delta: "a"})
	if !e.Claim() {
		t.Fatal("first Claim lost")
	}
	if e.Claim() {
		t.Fatal("second Claim won")
	}
	if e.Emit(RunEvent{Type: EventTypeDelta, Delta: "late"}) || e.Emit(RunEvent{Type: EventTypeComplete}) {
		t.Fatal("provider output delivered after the claim")
	}
	if e.Finish(RunEvent{Type: EventTypeDelta, Delta: "not terminal"}) {
		t.Fatal("Finish delivered a non-terminal event")
	}
	if !e.Finish(RunEvent{Type: EventTypeError, Error: "stalled"}) {
		t.Fatal("Finish did not deliver the claimant's terminal")
	}
	if e.Finish(RunEvent{Type: EventTypeError, Error: "again"}) {
		t.Fatal("second Finish delivered")
	}
	if len(got) != 2 || got[1].Error != "stalled" {
		t.Fatalf("delivered %+v", got)
	}
	// Claim after a delivered terminal loses.
	e2 := NewEmitter(func(RunEvent) {})
	e2.Emit(RunEvent{Type: EventTypeComplete})
	if e2.Claim() || !e2.Closed() {
		t.Fatal("Claim won after a terminal was delivered")
	}
	// Finish without Claim does nothing.
	e3 := NewEmitter(func(RunEvent) { t.Fatal("delivered without claim") })
	if e3.Finish(RunEvent{Type: EventTypeError}) {
		t.Fatal("Finish without Claim delivered")
	}
}

func TestEmitterClaimRacesTerminal(t *testing.T) {
	for i := range 2000 {
		var n int
		var mu sync.Mutex
		e := NewEmitter(func(ev RunEvent) {
			if ev.Type.IsTerminal() {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
		var wg sync.WaitGroup
		wg.Go(func() { e.Emit(RunEvent{Type: EventTypeComplete}) })
		wg.Go(func() {
			if e.Claim() {
				e.Finish(RunEvent{Type: EventTypeError, Error: "stalled"})
			}
		})
		wg.Wait()
		if n != 1 {
			t.Fatalf("iteration %d: %d terminals, want 1", i, n)
		}
	}
}

func TestFrameEmitter(t *testing.T) {
	var got []ProviderTunnelFrame
	e := NewFrameEmitter(func(f ProviderTunnelFrame) { got = append(got, f) })
	e.Emit(ProviderTunnelFrame{Type: FrameTypeResponseStart, Status: 200})
	e.Emit(ProviderTunnelFrame{Type: FrameTypeBody, Body: []byte("x")})
	e.Emit(ProviderTunnelFrame{Type: FrameTypeError, Error: "reset"})
	if e.Emit(ProviderTunnelFrame{Type: FrameTypeEnd}) {
		t.Fatal("frame after terminal delivered")
	}
	if len(got) != 3 || got[2].Type != FrameTypeError {
		t.Fatalf("frames %+v", got)
	}
}
