package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// upRecorder is the node's side of an Attempt stream: it records what the
// node sends to the edge.
type upRecorder struct {
	grpc.ClientStream
	mu  sync.Mutex
	ups []*wire.AttemptUp
}

func (u *upRecorder) Send(m *wire.AttemptUp) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ups = append(u.ups, m)
	return nil
}

func (u *upRecorder) Recv() (*wire.AttemptDown, error) { select {} }

// endings counts what ends an attempt on the wire: terminal events and
// frames, and command results.
func (u *upRecorder) endings() (n int, after bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range u.ups {
		evs, fs := m.GetBatch().GetEvents(), m.GetBatch().GetFrames()
		if m.GetEvent() != nil {
			evs = append(evs, m.GetEvent())
		}
		if m.GetFrame() != nil {
			fs = append(fs, m.GetFrame())
		}
		for _, ev := range evs {
			after = after || n > 0
			if execution.EventType(ev.GetType()).IsTerminal() {
				n++
			}
		}
		for _, f := range fs {
			after = after || n > 0
			if execution.FrameType(f.GetType()).IsTerminal() {
				n++
			}
		}
		if m.GetCommandResult() != nil {
			after = after || n > 0
			n++
		}
	}
	return n, after
}

// FuzzAttemptDown is F5 on the node: random bytes into proto.Unmarshal as
// the edge's AttemptDown, then the node's handler. Whatever the message —
// a run, a tunnel, a command, nothing, with any stall timeout, run id,
// provider or command name — the node never panics and answers with
// exactly one ending (a terminal event or frame, or one command result),
// and nothing after it.
func FuzzAttemptDown(f *testing.F) {
	seed := func(m *wire.AttemptDown) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: runReq(0)}})
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Run{Run: &wire.RunRequest{RunId: "r", ProviderId: "missing", ResponseStallTimeoutMs: -5}}})
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Tunnel{Tunnel: &wire.ProviderTunnelRequest{RunId: "r", ProviderId: "p1", Method: "POST", Path: "/v1/chat/completions"}}})
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "capabilities", ProviderId: "p1", AdapterKey: testInstance, Target: "llama3.2"}}})
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "rm -rf", ProviderId: "p1"}}})
	seed(&wire.AttemptDown{Msg: &wire.AttemptDown_Command{Command: &wire.Command{Command: "ollama_api", ProviderId: "p1", Path: "/api/tags"}}})
	seed(&wire.AttemptDown{})
	f.Add([]byte{0xff, 0x01})

	p := &probingProvider{funcProvider: &funcProvider{
		exec: func(_ context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
			emit.Emit(execution.RunEvent{Type: execution.EventTypeStart, Model: req.Model})
			emit.Emit(execution.RunEvent{Type: execution.EventTypeDelta, Delta: "x"})
			emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: "stop"})
			return nil
		},
		tunnel: func(_ context.Context, _ *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: 200})
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("{}")})
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
			return nil
		},
	}, probe: availableProbe(execution.HealthAvailable)}
	env := newBridgeEnv(f, p, 10*time.Millisecond, nil)
	a := &Agent{bridge: env.bridge}
	f.Fuzz(func(t *testing.T, data []byte) {
		down := &wire.AttemptDown{}
		if proto.Unmarshal(data, down) != nil {
			return // grpc refuses the message before any handler sees it
		}
		rec := &upRecorder{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// As serve does over the network: the provider on a goroutine of
		// its own, the attempt ended at its terminal. A terminal that only
		// the 10 s bound ended is a failure: the provider never ran.
		var providers sync.WaitGroup
		s := a.start(ctx, nil, rec, down, nil)
		s.background(&providers).wait(ctx)
		providers.Wait()
		if ctx.Err() != nil {
			t.Fatalf("no terminal within 10 s for %v: %v", down, rec.ups)
		}
		if n, after := rec.endings(); n != 1 || after {
			t.Fatalf("%d endings (messages after one: %v) for %v: %v", n, after, down, rec.ups)
		}
	})
}

// FuzzStallObservationRedaction is F7 on the node: a sentinel in every
// field of a stall observation never reaches a metric label or the log
// record; only the closed vocabularies do.
func FuzzStallObservationRedaction(f *testing.F) {
	f.Add("normalized", "available", "request_stalled", "confirmed", int64(300000))
	f.Add("x\n{\"level\":\"error\"}", "\x1b[31m", "", "unconfirmed", int64(-1))
	reg := prometheus.NewRegistry()
	buf := &bytes.Buffer{}
	o := newLivenessObservability(reg, slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.Fuzz(func(t *testing.T, path, health, class, fence string, idle int64) {
		const s = "SENTINEL-"
		buf.Reset()
		o.ObserveStall(StallObservation{ExecutionPath: execution.ExecutionPath(s + path), ProviderHealth: execution.HealthStatus(s + health),
			LivenessClassification: execution.ProviderHealth(s + class), AttemptFence: execution.AttemptFence(s + fence), IdleDurationMS: idle})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if out := fmt.Sprint(mfs) + buf.String(); strings.Contains(out, "SENTINEL") {
			t.Fatalf("sentinel in the output:\n%s", out)
		}
	})
}
