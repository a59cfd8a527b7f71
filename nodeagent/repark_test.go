package nodeagent

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/iopgw/iop/wire"
)

// parkedStream is the next stream the node parked on e.
func parkedStream(t *testing.T, e *fakeEdge) *edgeAttempt {
	t.Helper()
	select {
	case a := <-e.parked:
		t.Cleanup(a.end)
		return a
	case <-time.After(defaultTestTimeout):
		t.Fatal("the node parked no stream")
		return nil
	}
}

// TestStreamParksItselfAfterTerminal: after each terminal the node opens
// its stream again, parked, without waiting for Reparked
// (AttemptOpen.parks_after_terminal), and serves the next work sent on
// it; a Reparked from an edge that does not know the field is ignored
// (the open went out already).
func TestStreamParksItselfAfterTerminal(t *testing.T) {
	for _, oldEdge := range []bool{false, true} {
		t.Run(fmt.Sprintf("edge sends Reparked=%v", oldEdge), func(t *testing.T) {
			e := newFakeEdge()
			e.parkedAttempts = 4
			l := startLinkTo(t, e, baseConfig(simProvider("p1", SimConfig{})), Options{})
			s := l.session(t)
			st := parkedStream(t, e)
			if o := st.open; !o.GetParksAfterTerminal() || !o.GetReusable() {
				t.Fatalf("parked open %v", o)
			}
			for i := range 3 {
				if err := st.stream.Send(runDown("p1", "iop-sim", 0)); err != nil {
					t.Fatal(err)
				}
				if evs := st.events(t); evs[len(evs)-1].GetType() != "complete" {
					t.Fatalf("attempt %d ended %v", i, evs[len(evs)-1])
				}
				if oldEdge {
					if err := st.stream.Send(&wire.AttemptDown{Msg: &wire.AttemptDown_Reparked{Reparked: &wire.Reparked{}}}); err != nil {
						t.Fatal(err)
					}
				}
				m, err := st.stream.Recv()
				if err != nil || !m.GetOpen().GetParked() || !m.GetOpen().GetParksAfterTerminal() || m.GetOpen().GetConnectionGeneration() != s.gen {
					t.Fatalf("after attempt %d's terminal the node sent %v %v, want a parked open of generation %d", i, m, err, s.gen)
				}
			}
		})
	}
}

// TestStreamHalfClosedWhenEnoughParked: a node that has as many streams
// parked as the edge allows half-closes a stream after its terminal
// instead of parking it again, and ends it when the edge does.
func TestStreamHalfClosedWhenEnoughParked(t *testing.T) {
	e := newFakeEdge()
	e.parkedAttempts = 1
	l := startLinkTo(t, e, baseConfig(simProvider("p1", SimConfig{})), Options{})
	l.session(t)
	st := parkedStream(t, e)
	if err := st.stream.Send(runDown("p1", "iop-sim", 0)); err != nil {
		t.Fatal(err)
	}
	replacement := parkedStream(t, e) // the work took the only parked stream: another is parked
	if evs := st.events(t); evs[len(evs)-1].GetType() != "complete" {
		t.Fatalf("the attempt ended %v", evs[len(evs)-1])
	}
	if m, err := st.stream.Recv(); err != io.EOF {
		t.Fatalf("after the terminal with enough parked the node sent %v %v, want its half-close", m, err)
	}
	st.end()
	// The replacement still carries work.
	if err := replacement.stream.Send(runDown("p1", "iop-sim", 0)); err != nil {
		t.Fatal(err)
	}
	if evs := replacement.events(t); evs[len(evs)-1].GetType() != "complete" {
		t.Fatalf("the replacement's attempt ended %v", evs[len(evs)-1])
	}
}

// TestDrainWaitsForTheEdgeToEndTheStream: a draining node half-closes a
// stream after its attempt's terminal, and does not stop (cancelling its
// streams, which drops what the link's writer still holds) until the edge
// has ended that stream — the terminal reached the edge, not only the
// node's writer.
func TestDrainWaitsForTheEdgeToEndTheStream(t *testing.T) {
	e := newFakeEdge()
	e.parkedAttempts = 1
	l := startLinkTo(t, e, baseConfig(simProvider("p1", SimConfig{TokenLatency: 20 * time.Millisecond, MaxTokens: 5})), Options{})
	l.session(t)
	st := parkedStream(t, e)
	if err := st.stream.Send(runDown("p1", "iop-sim", 0)); err != nil {
		t.Fatal(err)
	}
	st.items(t) // the attempt is running…
	l.cancel()  // …when the node drains: it runs on
	if evs := st.events(t); evs[len(evs)-1].GetType() != "complete" {
		t.Fatalf("the attempt ended %v", evs[len(evs)-1])
	}
	if m, err := st.stream.Recv(); err != io.EOF {
		t.Fatalf("after the terminal a draining node sent %v %v, want its half-close", m, err)
	}
	select {
	case err := <-l.done:
		l.done <- err
		t.Fatal("the node stopped before the edge ended the stream its terminal went on")
	case <-time.After(500 * time.Millisecond):
	}
	st.end()
	select {
	case err := <-l.done:
		l.done <- err
		if err != nil {
			t.Fatalf("the drained node's Run: %v", err)
		}
	case <-time.After(defaultTestTimeout):
		t.Fatal("the node did not stop once the edge ended the stream")
	}
}
