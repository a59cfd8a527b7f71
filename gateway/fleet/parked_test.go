package fleet

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/wire"
)

// liveSession opens a session that answers heartbeats (a node must, to
// park streams) until pongs is closed or the session ends; it returns the
// session and the Welcome.
func liveSession(t *testing.T, ctx context.Context, c wire.NodeLinkClient, nodeID string, pongs <-chan struct{}) (wire.NodeLink_SessionClient, *wire.Welcome) {
	t.Helper()
	st, err := c.Session(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Hello{Hello: &wire.Hello{NodeId: nodeID, Heartbeats: true,
		Advertisement: &wire.Advertisement{NodeId: nodeID, Providers: []*wire.ProviderAdvertisement{{ProviderId: "p", Models: []string{"m"}, Capacity: 8}}}}}}); err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			select {
			case <-pongs:
				continue // frozen: pings go unanswered
			default:
			}
			if p := m.GetPing(); p != nil {
				_ = st.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Pong{Pong: &wire.Pong{Seq: p.GetSeq()}}})
			}
		}
	}()
	return st, m.GetWelcome()
}

// park opens a parked attempt stream claiming generation gen.
func park(t *testing.T, ctx context.Context, c wire.NodeLinkClient, gen uint64) wire.NodeLink_AttemptClient {
	t.Helper()
	st, err := c.Attempt(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	// A refused stream may already be closed (io.EOF here); its status
	// comes with Recv.
	if err := st.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{Parked: true, ConnectionGeneration: gen}}}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return st
}

// waitParked waits until the node's current connection has n parked
// streams.
func (e *hubEnv) waitParked(t *testing.T, nodeID string, n int) *nodeConn {
	t.Helper()
	var c *nodeConn
	wait.UntilWithin(t, 5*time.Second, func() bool {
		e.hub.mu.Lock()
		c = e.hub.conns[nodeID]
		e.hub.mu.Unlock()
		if c == nil {
			return false
		}
		c.attemptsMu.Lock()
		defer c.attemptsMu.Unlock()
		return len(c.parked) == n
	})
	return c
}

// TestParkLimitFollowsCapacity: a node parks the configured number of
// streams, but no more than its providers can run at once.
func TestParkLimitFollowsCapacity(t *testing.T) {
	ads := func(caps ...int32) (out []*wire.ProviderAdvertisement) {
		for _, c := range caps {
			out = append(out, &wire.ProviderAdvertisement{Capacity: c})
		}
		return out
	}
	for _, tc := range []struct {
		configured int
		ads        []*wire.ProviderAdvertisement
		want       int
	}{
		{64, ads(4), 4},
		{64, ads(4, 10), 14},
		{64, ads(100000), 64},
		{64, ads(40, 40), 64},
		{0, ads(8), 0},
		{64, nil, 0},
	} {
		if got := parkLimit(tc.configured, tc.ads); got != tc.want {
			t.Errorf("parkLimit(%d, %d ads) = %d, want %d", tc.configured, len(tc.ads), got, tc.want)
		}
	}
	// Through a session: a node of capacity 8 under a limit of 64.
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	e.hub.link.ParkedAttempts = 64
	_, w := liveSession(t, t.Context(), e.client(t), "n1", nil)
	if w.GetParkedAttempts() != 8 {
		t.Fatalf("welcome allows %d parked streams to a node of capacity 8, want 8", w.GetParkedAttempts())
	}
}

// TestParkedStreamsFollowTheirGeneration: a parked stream serves only the
// connection generation it named. A reconnect ends the old generation's
// parked streams, a stream claiming an old generation is refused, the
// new generation's parked stream carries work with no Dispatch, and the
// Welcome's allowance bounds how many may park.
func TestParkedStreamsFollowTheirGeneration(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	e.hub.link.ParkedAttempts = 2
	client := e.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	_, w1 := liveSession(t, ctx, client, "n1", nil)
	if w1.GetParkedAttempts() != 2 {
		t.Fatalf("welcome allows %d parked streams, want 2", w1.GetParkedAttempts())
	}
	old := park(t, ctx, client, w1.GetConnectionGeneration())
	e.waitParked(t, "n1", 1)

	_, w2 := liveSession(t, ctx, client, "n1", nil) // the node reconnects
	if _, err := old.Recv(); err == nil {
		t.Fatal("the old generation's parked stream survived the reconnect")
	}
	stale := park(t, ctx, client, w1.GetConnectionGeneration())
	if _, err := stale.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("a parked stream of the superseded generation: %v", err)
	}

	parked := []wire.NodeLink_AttemptClient{park(t, ctx, client, w2.GetConnectionGeneration()), park(t, ctx, client, w2.GetConnectionGeneration())}
	e.waitParked(t, "n1", 2)
	if _, err := park(t, ctx, client, w2.GetConnectionGeneration()).Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a parked stream past the allowance: %v", err)
	}

	down := &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: "r1"}}}
	ac, err := e.hub.Open(ctx, pool.Reception{NodeID: "n1", ConnectionGeneration: w2.GetConnectionGeneration()}, down)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.End()
	work := make(chan *wire.AttemptDown, 2)
	for _, st := range parked {
		go func() {
			if m, err := st.Recv(); err == nil {
				work <- m
			}
		}()
	}
	select {
	case got := <-work:
		if got.GetRun().GetRunId() != "r1" {
			t.Fatalf("a parked stream received %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no parked stream received the work")
	}
	if n := testutil.ToFloat64(e.m.attemptStreams.WithLabelValues("parked")); n != 1 {
		t.Fatalf("%v attempts went onto parked streams, want 1", n)
	}
	if n := testutil.ToFloat64(e.m.attemptStreams.WithLabelValues("dispatched")); n != 0 {
		t.Fatalf("%v attempts were dispatched, want 0", n)
	}
	e.waitParked(t, "n1", 1)
}

// TestParkedWorkNotTakenUp: work sent onto a parked stream of a node
// that then stops answering heartbeats (frozen) ends before commit within
// the open timeout, and the node takes no new work; a node that keeps
// answering heartbeats keeps its slow attempt.
func TestParkedWorkNotTakenUp(t *testing.T) {
	for _, frozen := range []bool{true, false} {
		e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
		e.hub.link = NodeLinkConfig{OpenTimeout: 300 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond,
			HeartbeatTimeout: time.Minute, ParkedAttempts: 1}
		client := e.client(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		pongs := make(chan struct{})
		_, w := liveSession(t, ctx, client, "n1", pongs)
		park(t, ctx, client, w.GetConnectionGeneration())
		e.waitParked(t, "n1", 1)
		if frozen {
			close(pongs)
		}
		ac, err := e.hub.Open(ctx, pool.Reception{NodeID: "n1", ConnectionGeneration: w.GetConnectionGeneration()},
			&wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: "r1"}}})

		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { _, err := ac.Recv(); got <- err }()
		select {
		case err := <-got:
			if !frozen || !errors.Is(err, errNotTakenUp) {
				t.Fatalf("frozen=%v: attempt ended with %v", frozen, err)
			}
			state := e.pool.NodeState("n1", w.GetConnectionGeneration())
			if state != pool.NodeSuspect {
				t.Fatalf("frozen node's state %q, want suspect", state)
			}
		case <-time.After(map[bool]time.Duration{true: 5 * time.Second, false: time.Second}[frozen]):
			if frozen {
				t.Fatal("work on a frozen node's parked stream never ended")
			}
			ac.End()
		}
	}
}

// reparkEnv is a hub with node n1 in session (two streams may park),
// for the tests of streams that carry one attempt after another.
type reparkEnv struct {
	*hubEnv
	nl  wire.NodeLinkClient
	ctx context.Context
	gen uint64
}

func startReparkEnv(t *testing.T) *reparkEnv {
	t.Helper()
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	e.hub.link.ParkedAttempts = 2
	client := e.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, w := liveSession(t, ctx, client, "n1", nil)
	return &reparkEnv{hubEnv: e, nl: client, ctx: ctx, gen: w.GetConnectionGeneration()}
}

// dispatch sends run id to the node's parked stream st, whose next
// message must be that work.
func (r *reparkEnv) dispatch(t *testing.T, st wire.NodeLink_AttemptClient, id string) *AttemptConn {
	t.Helper()
	owner := pool.Reception{NodeID: "n1", ConnectionGeneration: r.gen}
	ac, err := r.hub.Open(r.ctx, owner, &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: id}}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetRun().GetRunId() != id {
		t.Fatalf("%s on the parked stream: %v %v", id, m, err)
	}
	return ac
}

// doneTerminal is a run's terminal as a node sends it.
var doneTerminal = &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{Type: "done"}}}

// parkReusable opens a reusable parked attempt stream for generation gen.
func parkReusable(t *testing.T, ctx context.Context, c wire.NodeLinkClient, gen uint64) wire.NodeLink_AttemptClient {
	t.Helper()
	st, err := c.Attempt(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(reopen(gen)); err != nil {
		t.Fatal(err)
	}
	return st
}

func reopen(gen uint64) *wire.AttemptUp {
	return &wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{Parked: true, Reusable: true, ConnectionGeneration: gen}}}
}

// TestReparkedStreamCarriesTheNextAttempt: a reusable parked stream whose
// attempt finished (the edge took its terminal) is reparked — Reparked,
// the node opens it again, and the next attempt goes on the same stream
// with no stream opened; an attempt ended without its terminal (a
// cancel) ends the stream as before, and so does a finished attempt on a
// stream the node did not open reusable; a reopen naming another
// generation is refused.
func TestReparkedStreamCarriesTheNextAttempt(t *testing.T) {
	r := startReparkEnv(t)
	e, client, ctx, gen, terminal := r.hubEnv, r.nl, r.ctx, r.gen, doneTerminal

	st := parkReusable(t, ctx, client, gen)
	e.waitParked(t, "n1", 1)
	for _, id := range []string{"r1", "r2", "r3"} {
		ac := r.dispatch(t, st, id)
		if err := st.Send(terminal); err != nil {
			t.Fatal(err)
		}
		if m, err := ac.Recv(); err != nil || m.GetEvent().GetType() != "done" {
			t.Fatalf("the edge read %v %v", m, err)
		}
		ac.Finish()
		if m, err := st.Recv(); err != nil || m.GetReparked() == nil {
			t.Fatalf("after the terminal the node got %v %v, want Reparked", m, err)
		}
		if err := st.Send(reopen(gen)); err != nil {
			t.Fatal(err)
		}
		e.waitParked(t, "n1", 1)
	}
	if n := testutil.ToFloat64(e.m.reparked); n != 3 {
		t.Fatalf("reparked %v times, want 3", n)
	}
	if n := testutil.ToFloat64(e.m.attemptStreams.WithLabelValues("parked")); n != 3 {
		t.Fatalf("%v attempts went onto parked streams, want 3", n)
	}

	// Cancelled before its terminal: the stream ends, nothing is reparked.
	r.dispatch(t, st, "r4").End()
	if m, err := st.Recv(); err == nil {
		t.Fatalf("a cancelled attempt's stream got %v, want its end", m)
	}

	// Not opened reusable: a finished attempt ends its stream.
	plain := park(t, ctx, client, gen)
	e.waitParked(t, "n1", 1)
	r.dispatch(t, plain, "r5").Finish()
	if m, err := plain.Recv(); err == nil {
		t.Fatalf("a stream not opened reusable got %v after its attempt, want its end", m)
	}

	// A reopen that names another generation is refused.
	st = parkReusable(t, ctx, client, gen)
	e.waitParked(t, "n1", 1)
	r.dispatch(t, st, "r6").Finish()
	if m, err := st.Recv(); err != nil || m.GetReparked() == nil {
		t.Fatalf("got %v %v, want Reparked", m, err)
	}
	_ = st.Send(reopen(gen + 1))
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a reopen for another generation: %v", err)
	}
}

// TestDispatchedStreamIsReparked: a stream a node opened for a Dispatch,
// reusable, is reparked after its attempt like a parked one, and carries
// the next attempt with no Dispatch; one not opened reusable ends after
// its attempt, as from nodes before reusable dispatched streams.
func TestDispatchedStreamIsReparked(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	e.hub.link.ParkedAttempts = 4
	client := e.client(t)
	ctx := t.Context()
	sst, err := client.Session(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sst.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Hello{Hello: &wire.Hello{NodeId: "n1", Heartbeats: true,
		Advertisement: &wire.Advertisement{NodeId: "n1", Providers: []*wire.ProviderAdvertisement{ad("p", 4, "m")}}}}}); err != nil {
		t.Fatal(err)
	}
	w, err := sst.Recv()
	if err != nil || w.GetWelcome() == nil {
		t.Fatalf("welcome: %v %v", w, err)
	}
	gen := w.GetWelcome().GetConnectionGeneration()
	owner := pool.Reception{NodeID: "n1", ConnectionGeneration: gen}
	terminal := &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: &wire.RunEvent{Type: "done"}}}
	// dispatched runs one attempt on a stream opened for its Dispatch.
	dispatched := func(id string, reusable bool) wire.NodeLink_AttemptClient {
		t.Helper()
		opened := make(chan *AttemptConn, 1)
		go func() {
			ac, err := e.hub.Open(ctx, owner, &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: id}}})
			if err != nil {
				t.Error(err)
			}
			opened <- ac
		}()
		var d *wire.Dispatch
		for d == nil {
			m, err := sst.Recv()
			if err != nil {
				t.Fatal(err)
			}
			d = m.GetDispatch()
		}
		at, err := client.Attempt(withToken(ctx, "tok"))
		if err != nil {
			t.Fatal(err)
		}
		open := &wire.AttemptOpen{DispatchId: d.GetDispatchId(), ConnectionGeneration: gen, Reusable: reusable}
		if err := at.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: open}}); err != nil {
			t.Fatal(err)
		}
		if m, err := at.Recv(); err != nil || m.GetRun().GetRunId() != id {
			t.Fatalf("%s: %v %v", id, m, err)
		}
		ac := <-opened
		if ac == nil {
			t.Fatal("no attempt")
		}
		_ = at.Send(terminal)
		if m, err := ac.Recv(); err != nil || m.GetEvent().GetType() != "done" {
			t.Fatalf("the edge read %v %v", m, err)
		}
		ac.Finish()
		return at
	}

	at := dispatched("r1", true)
	if m, err := at.Recv(); err != nil || m.GetReparked() == nil {
		t.Fatalf("after its terminal a reusable dispatched stream got %v %v, want Reparked", m, err)
	}
	if err := at.Send(reopen(gen)); err != nil {
		t.Fatal(err)
	}
	e.waitParked(t, "n1", 1)
	ac, err := e.hub.Open(ctx, owner, &wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: "r2"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.End()
	if m, err := at.Recv(); err != nil || m.GetRun().GetRunId() != "r2" {
		t.Fatalf("the next attempt on the reparked stream: %v %v", m, err)
	}
	if n := testutil.ToFloat64(e.m.attemptStreams.WithLabelValues("parked")); n != 1 {
		t.Fatalf("%v attempts went onto parked streams, want 1", n)
	}

	plain := dispatched("r3", false)
	if m, err := plain.Recv(); err == nil {
		t.Fatalf("a dispatched stream not opened reusable got %v after its attempt, want its end", m)
	}
}

// TestStreamParkedAgainUnasked: a node that parks its streams after the
// terminal on its own (AttemptOpen.parks_after_terminal) gets no
// Reparked: its parked open after the terminal puts the stream back in
// the pool, and the next attempt arrives on it; a half-close instead
// ends the stream, and so does an attempt ended before its terminal.
func TestStreamParkedAgainUnasked(t *testing.T) {
	r := startReparkEnv(t)
	e, client, ctx, gen, terminal := r.hubEnv, r.nl, r.ctx, r.gen, doneTerminal
	open := &wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: &wire.AttemptOpen{Parked: true, Reusable: true, ParksAfterTerminal: true, ConnectionGeneration: gen}}}
	st, err := client.Attempt(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(open); err != nil {
		t.Fatal(err)
	}
	e.waitParked(t, "n1", 1)
	for _, id := range []string{"r1", "r2", "r3"} {
		ac := r.dispatch(t, st, id)
		for _, m := range []*wire.AttemptUp{terminal, open} { // the open unasked, right behind the terminal
			if err := st.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		if m, err := ac.Recv(); err != nil || m.GetEvent().GetType() != "done" {
			t.Fatalf("the edge read %v %v", m, err)
		}
		ac.Finish()
		e.waitParked(t, "n1", 1)
	}
	if n := testutil.ToFloat64(e.m.reparked); n != 3 {
		t.Fatalf("reparked %v times, want 3", n)
	}

	// Half-closed after the terminal: the stream ends.
	ac := r.dispatch(t, st, "r4")
	_ = st.Send(terminal)
	_ = st.CloseSend()
	if _, err := ac.Recv(); err != nil {
		t.Fatal(err)
	}
	ac.Finish()
	if m, err := st.Recv(); err == nil {
		t.Fatalf("a half-closed stream got %v, want its end", m)
	}

	// Ended before its terminal: the stream ends though its open follows.
	st, err = client.Attempt(withToken(ctx, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(open)
	e.waitParked(t, "n1", 1)
	r.dispatch(t, st, "r5").End()
	if m, err := st.Recv(); err == nil {
		t.Fatalf("a cancelled attempt's stream got %v, want its end", m)
	}
}
