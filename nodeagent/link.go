package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/wire"
)

// attemptDrainTimeout bounds how long the node waits, after its terminal,
// for the edge to end an attempt stream.
const attemptDrainTimeout = 10 * time.Second

// tokenCreds sends the node token on every RPC.
type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }

// dialOptions returns the gRPC options for one edge.
func (a *Agent) dialOptions(e EdgeConfig) ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{
		grpc.WithKeepaliveParams(wire.NodeKeepalive),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: wire.NodeBackoff, MinConnectTimeout: 5 * time.Second}),
		grpc.WithPerRPCCredentials(tokenCreds{token: a.cfg.Token, secure: e.TLS.Enabled}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxMessageSize), grpc.MaxCallSendMsgSize(wire.MaxMessageSize)),
		grpc.WithInitialWindowSize(wire.NodeStreamWindow),
		grpc.WithInitialConnWindowSize(wire.NodeConnWindow),
	}
	if a.opts.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(a.opts.Dialer))
	}
	if !e.TLS.Enabled {
		return append(opts, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	tc, err := clientTLS(e)
	if err != nil {
		return nil, err
	}
	return append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc))), nil
}

func clientTLS(e EdgeConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: e.TLS.ServerName}
	if e.TLS.CAFile != "" {
		pem, err := os.ReadFile(e.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("edge %s: tls.ca_file: %w", e.Address, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("edge %s: tls.ca_file: no certificates found", e.Address)
		}
		tc.RootCAs = pool
	}
	if e.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(e.TLS.CertFile, e.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("edge %s: tls client certificate: %w", e.Address, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// runEdge keeps one session to edge e alive until ctx ends.
func (a *Agent) runEdge(ctx context.Context, e EdgeConfig) error {
	if ch, ok := a.opts.Channels[e.Address]; ok {
		return a.runInProcess(ctx, e.Address, ch)
	}
	opts, err := a.dialOptions(e)
	if err != nil {
		return err
	}
	// passthrough: dial the address as given (as grpc.Dial did), one
	// connection per edge; edges scale out by being listed separately.
	conn, err := grpc.NewClient("passthrough:///"+e.Address, opts...)
	if err != nil {
		return fmt.Errorf("edge %s: %w", e.Address, err)
	}
	defer conn.Close()
	client := wire.NewNodeLinkClient(conn)
	log := a.log.With(slog.String("edge", e.Address))
	a.links.up.WithLabelValues(e.Address).Set(0)
	retry := 0
	for ctx.Err() == nil {
		welcomed, err := a.session(ctx, e.Address, client, log)
		if ctx.Err() != nil {
			return nil
		}
		if welcomed {
			// The transport's own backoff paces reconnects, but its first
			// retry has no jitter: start after a random fraction of the base
			// delay so a fleet that lost the same edge does not come back in
			// lockstep.
			retry = 0
			log.Warn("edge session ended", slog.String("error", err.Error()))
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(wire.NodeBackoff.BaseDelay)))):
			case <-ctx.Done():
			}
			continue
		}
		delay := backoffDelay(retry)
		retry++
		cause := connectCause(err)
		a.links.failures.WithLabelValues(e.Address, cause).Inc()
		log.Warn("cannot open a session with the edge", slog.String("cause", cause), slog.String("error", err.Error()),
			slog.Int("attempt", retry), slog.Duration("retry_in", delay))
		waitReady(ctx, conn, delay)
	}
	return nil
}

// waitReady waits up to d, returning early when the transport (which keeps
// reconnecting on its own backoff) becomes ready: a restarted edge is
// rejoined as soon as it listens, while failures are logged at the pace
// of the growing delay.
func waitReady(ctx context.Context, conn *grpc.ClientConn, d time.Duration) {
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if s == connectivity.Idle {
			conn.Connect()
		}
		if !conn.WaitForStateChange(tctx, s) {
			return
		}
	}
}

// backoffDelay is NodeBackoff's delay for the n-th retry.
func backoffDelay(n int) time.Duration {
	d := float64(wire.NodeBackoff.BaseDelay)
	for i := 0; i < n && d < float64(wire.NodeBackoff.MaxDelay); i++ {
		d *= wire.NodeBackoff.Multiplier
	}
	d = min(d, float64(wire.NodeBackoff.MaxDelay))
	d *= 1 + wire.NodeBackoff.Jitter*(rand.Float64()*2-1)
	return time.Duration(d)
}

// session runs one Session stream. It reports whether the edge welcomed
// the node, and why the session ended.
func (a *Agent) session(ctx context.Context, addr string, client wire.NodeLinkClient, log *slog.Logger) (bool, error) {
	sctx, cancel := context.WithCancel(ctx)
	var attempts sync.WaitGroup
	defer attempts.Wait()
	defer cancel()

	// Fail fast: a connection in transient failure fails the call at once
	// with its cause (refused, DNS, TLS), which the caller logs and counts
	// before its backoff — never a silent wait.
	stream, err := client.Session(sctx)
	if err != nil {
		return false, err
	}
	hello := &wire.NodeMessage{Msg: &wire.NodeMessage_Hello{Hello: &wire.Hello{NodeId: a.cfg.NodeID, Version: a.opts.Version,
		Advertisement: a.advertisement(), Heartbeats: true}}}
	if err := stream.Send(hello); err != nil {
		return false, err
	}
	first, err := stream.Recv()
	if err != nil {
		return false, err
	}
	w := first.GetWelcome()
	if w == nil {
		return false, errNotWelcomed
	}
	sess := newSession(w.GetConnectionGeneration())
	sess.send = stream.Send
	a.setSession(addr, sess)
	if a.draining.Load() {
		_ = sess.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Draining{Draining: &wire.Draining{}}})
	}
	defer sess.markClosed()
	log.Info("edge session established", slog.Uint64("connection_generation", sess.Generation()))
	sess.parkTarget = int32(min(w.GetParkedAttempts(), maxParked))
	// Counted idle all at once, before any opens: work on the first
	// parked stream must see the whole count when it decides whether to
	// park a replacement (carry), or the session ends up with one more
	// parked than its target.
	sess.idle.Add(sess.parkTarget)
	for range sess.parkTarget {
		attempts.Go(func() { a.parked(sctx, client, sess, log, &attempts) })
	}
	a.links.up.WithLabelValues(addr).Set(1)
	defer a.links.up.WithLabelValues(addr).Set(0)
	for {
		m, err := stream.Recv()
		if err != nil {
			return true, err
		}
		switch msg := m.Msg.(type) {
		case *wire.EdgeMessage_Dispatch:
			id := msg.Dispatch.GetDispatchId()
			attempts.Go(func() { a.attempt(sctx, client, sess, id, log, &attempts) })
		case *wire.EdgeMessage_CancelRun:
			if _, err := a.bridge.CancelRun(msg.CancelRun.GetRunId()); err != nil {
				log.Warn("cancel_run rejected", slog.String("error", err.Error()))
			}
		case *wire.EdgeMessage_Ping:
			if err := sess.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Pong{Pong: &wire.Pong{Seq: msg.Ping.GetSeq()}}}); err != nil {
				return true, err
			}
		}
	}
}

// maxParked bounds the parked streams a node keeps per session, whatever
// the edge allows.
const maxParked = 1024

// attempt opens the Attempt stream for one dispatch and runs its work.
// The stream is opened reusable: an edge that reparks it after the
// attempt gets it back as a parked stream, when the session has room for
// one, so a burst that outran the parked streams leaves streams for the
// next one instead of ending them.
func (a *Agent) attempt(ctx context.Context, client wire.NodeLinkClient, sess *Session, dispatchID string, log *slog.Logger, attempts *sync.WaitGroup) {
	actx, cancel := context.WithCancel(ctx)
	st, down, err := openAttempt(actx, client, &wire.AttemptOpen{DispatchId: dispatchID, Reusable: true, ParksAfterTerminal: true, ConnectionGeneration: sess.Generation()})
	if err != nil {
		cancel()
		log.Warn("opening attempt stream failed", slog.String("error", err.Error()))
		return
	}
	a.carry(ctx, client, sess, log, attempts, held{st: st, ctx: actx, cancel: cancel, inproc: endsAttempt(st, cancel)}, down, false)
}

// held is an Attempt stream the node holds: its context (cancel ends
// it) and, on the in-process channel, the channel's own stream, whose
// end cancels that context without a read (endsAttempt) and to whose
// receiver a provider's reads can be handed over (withHandover).
type held struct {
	st     wire.NodeLink_AttemptClient
	ctx    context.Context
	cancel context.CancelFunc
	inproc grpc.ClientStream // nil over the network
}

// parked keeps one Attempt stream open ahead of work, and runs the work
// the edge sends on it (carry). Called with the stream counted idle.
func (a *Agent) parked(ctx context.Context, client wire.NodeLinkClient, sess *Session, log *slog.Logger, attempts *sync.WaitGroup) {
	actx, cancel := context.WithCancel(ctx)
	st, down, err := openAttempt(actx, client, parkedOpen(sess))
	if err != nil {
		cancel()
		sess.idle.Add(-1) // the stream ended while it waited
		return
	}
	a.carry(ctx, client, sess, log, attempts, held{st: st, ctx: actx, cancel: cancel, inproc: endsAttempt(st, cancel)}, down, true)
}

// carry runs the work that arrived on a parked stream (counted idle),
// and the work after it: the stream is reusable, so after each terminal
// it is parked again and carries the next work the edge sends on it —
// unless enough others are waiting already, or the node is draining,
// when it ends (serve, parkAgain). The session keeps between half its
// park target and the target parked: work taken below the half parks a
// replacement, a finished attempt above the target ends its stream, so
// steady traffic neither opens nor ends streams. parked says down came
// on a parked stream (the first work of attempt's did not). The stream
// ends when carry returns: on this goroutine; over the network, on the
// fresh goroutine each attempt's reads of the stream go on (serve); when
// an attempt's reads were handed over (handover), on the goroutine they
// end on, which carries the stream on from there.
func (a *Agent) carry(ctx context.Context, client wire.NodeLinkClient, sess *Session, log *slog.Logger, attempts *sync.WaitGroup,
	h held, down *wire.AttemptDown, parked bool) {
	for down != nil {
		if parked && sess.idle.Add(-1) < (sess.parkTarget+1)/2 && ctx.Err() == nil && !a.draining.Load() {
			sess.idle.Add(1)
			attempts.Go(func() { a.parked(ctx, client, sess, log, attempts) })
		}
		parked = true
		var ho *handover
		var await func() *wire.AttemptDown
		if down, ho, await = a.serve(sess, h, down); await != nil {
			// The stream is read, and carried on, on a fresh goroutine,
			// whose stack stays as shallow as a receive while the work
			// runs; this one, whose stack the start grew, ends.
			attempts.Go(func() { a.carry(ctx, client, sess, log, attempts, h, await(), true) })
			return
		}
		if ho == nil {
			continue
		}
		attempts.Add(1) // the goroutine the reads end on, until it is done with the stream
		next, here := ho.join(func(next *wire.AttemptDown) {
			defer attempts.Done()
			a.carry(ctx, client, sess, log, attempts, h, next, true)
		})
		if !here {
			return
		}
		attempts.Done()
		down = next
	}
	h.cancel()
}

// parkedOpen opens (or reopens) a reusable parked stream.
func parkedOpen(sess *Session) *wire.AttemptOpen {
	return &wire.AttemptOpen{Parked: true, Reusable: true, ParksAfterTerminal: true, ConnectionGeneration: sess.Generation()}
}

// openAttempt opens an Attempt stream, sends open and waits for the work.
func openAttempt(ctx context.Context, client wire.NodeLinkClient, open *wire.AttemptOpen) (wire.NodeLink_AttemptClient, *wire.AttemptDown, error) {
	st, err := client.Attempt(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Send(&wire.AttemptUp{Msg: &wire.AttemptUp_Open{Open: open}}); err != nil {
		return nil, nil, err
	}
	down, err := st.Recv()
	if err != nil {
		return nil, nil, err
	}
	return st, down, nil
}

// serve runs down on its stream and returns the stream's next work, or
// nil when the stream ended. The attempt's goroutine starts the work and
// then reads the stream: the edge ending it (or the connection dying)
// cancels the work. Every stream is reusable and parks itself after the
// terminal (parkAgain): the next work the edge sends on it is served
// next. Over the network an attempt costs the node two goroutines, no
// watcher beside them: the provider's, started here, and the one that
// reads the stream, which serve leaves to its caller (await): a fresh
// goroutine keeps a held stream's reader on a small stack, where this
// one's was grown by the start; inline (a stream whose end cancels its
// context without being read, see endsAttempt) the provider runs on this
// goroutine before it reads. The work ends (its watchdog, admission and
// context) as soon as its provider returns. A stream the node half-closed
// after its terminal gets attemptDrainTimeout for the edge to end it
// before the node does.
func (a *Agent) serve(sess *Session, h held, down *wire.AttemptDown) (next *wire.AttemptDown, ho *handover, await func() *wire.AttemptDown) {
	r := &reuse{}
	ended := func() {
		if !a.parkAgain(sess, h, &r.parked) {
			if r.halfClosed.CompareAndSwap(0, 1) {
				a.closing.Add(1) // until the edge ends the stream (below)
			}
			t := a.bridge.clock.AfterFunc(attemptDrainTimeout, h.cancel)
			r.drain.Store(&t)
		}
	}
	ctx := h.ctx
	if h.inproc != nil {
		ctx, ho = withHandover(ctx, h.inproc, a.bridge.workers.Go)
	}
	work := a.start(ctx, sess, h.st, down, ended)
	if h.inproc != nil || work.att == nil {
		work.here()
		if ho != nil && ho.taken.Load() {
			ho.serveEnd = func() *wire.AttemptDown {
				work.end()
				return a.awaitNext(sess, h, work, r)
			}
			return nil, ho, nil
		}
		work.end()
		return a.awaitNext(sess, h, work, r), nil, nil
	}
	a.bridge.goProvider(func() { work.here(); work.end() })
	return nil, nil, func() *wire.AttemptDown { growForRecv(); return a.awaitNext(sess, h, work, r) }
}

// reuse is what an attempt's terminal made of its stream, read when the
// stream's next work or end comes: parked again for more work, or
// half-closed with a timer for the edge to end it. Its fields live in
// one allocation an attempt.
type reuse struct {
	drain  atomic.Pointer[clock.Timer]
	parked atomic.Bool
	// halfClosed: 0 while the stream is open, 1 once it is half-closed
	// and counted in a.closing, 2 once it is over (ended runs on the
	// provider's goroutine and may come after the edge ended the stream).
	halfClosed atomic.Int32
}

// awaitNext reads an attempt's stream, once its work was started, for the
// next work the edge sends on it when it was parked again, or its end
// (which cancels the work), and ends the attempt.
func (a *Agent) awaitNext(sess *Session, h held, work started, r *reuse) (next *wire.AttemptDown) {
	for {
		m, err := h.st.Recv()
		if err != nil {
			h.cancel()
			break
		}
		if m.GetReparked() == nil && r.parked.Load() {
			next = m // work for the stream parked again
			break
		}
		// A Reparked from an edge that does not know parks_after_terminal
		// (the open went out already): the next work follows it.
	}
	work.end()
	if t := r.drain.Load(); t != nil {
		(*t).Stop()
	}
	if r.halfClosed.Swap(2) == 1 {
		a.closing.Add(-1)
	}
	if next == nil && r.parked.Load() {
		sess.idle.Add(-1) // the parked stream ended while it waited
	}
	return next
}

// parkAgain follows an attempt's terminal on its stream
// (AttemptOpen.parks_after_terminal): the stream is counted idle and
// opened again, parked, for the next work — unless the session has
// enough parked, the node is draining or the stream is ending: then it
// is half-closed, for the edge to end it. It reports whether the stream
// was parked again.
func (a *Agent) parkAgain(sess *Session, h held, parked *atomic.Bool) bool {
	if h.ctx.Err() == nil && !a.draining.Load() {
		if sess.idle.Add(1) <= sess.parkTarget {
			parked.Store(true) // before the open: the next work may follow it at once
			_ = h.st.Send(sess.reopen)
			return true
		}
		sess.idle.Add(-1)
	}
	_ = h.st.CloseSend()
	return false
}

// start starts one unit of work on the bridge.
func (a *Agent) start(ctx context.Context, sess *Session, st wire.NodeLink_AttemptClient, down *wire.AttemptDown, ended func()) started {
	switch w := down.Msg.(type) {
	case *wire.AttemptDown_Run:
		return a.bridge.startRun(ctx, sess, w.Run, st.Send, ended)
	case *wire.AttemptDown_Tunnel:
		return a.bridge.startTunnel(ctx, sess, w.Tunnel, st.Send, ended)
	case *wire.AttemptDown_Command:
		return a.bridge.startCommand(ctx, sess, w.Command, st.Send, ended)
	default:
		return refused(st.Send, ended, eventMsg(runEventToProto(errorEvent(execution.NewFailure(execution.FailureCodeInvalidRequest, "empty attempt")), attemptIdentity{})))
	}
}

// advertisement describes the node's providers.
func (a *Agent) advertisement() *wire.Advertisement {
	ad := &wire.Advertisement{NodeId: a.cfg.NodeID}
	a.provMu.RLock()
	defer a.provMu.RUnlock()
	for _, pc := range a.cfg.Providers {
		p, desc, err := a.registry.Lookup(pc.ID)
		if err != nil {
			continue
		}
		_, tunnels := p.(execution.Tunneler)
		_, native := p.(execution.CommandHandler)
		ad.Providers = append(ad.Providers, &wire.ProviderAdvertisement{
			ProviderId: desc.ProviderID, Adapter: desc.Adapter, Target: desc.Target, InstanceKey: desc.InstanceKey,
			Models: desc.Models, Capacity: int32(desc.Capacity), ResponseStallTimeoutMs: desc.EffectiveResponseStallTimeoutMS(),
			ExecutionPath: pc.PathPolicy(), SupportsTunnel: tunnels, SupportsOllamaApi: native && pc.Adapter == "ollama",
			Surfaces: pc.Surfaces, Prefill: pc.Prefill != nil && *pc.Prefill,
		})
	}
	return ad
}

// streamEnd is a client stream that reports the server's end without
// being read: the in-process channel's (internal/inproc).
type streamEnd interface {
	AfterEnd(f func()) (stop func() bool)
}

// endsAttempt arranges for cancel to run when the edge ends st, and
// returns the in-process channel's stream under st if it could: on that
// channel the edge's end reaches the node as a call, so an attempt needs
// no goroutine reading the stream beside its provider. A network stream
// learns of the end only by reading (nil). Inline, a provider that ignored its context
// would hold the attempt's goroutine, its stream and the session's end
// (attempts.Wait), where on its own goroutine it held only that; every
// built-in provider's upstream I/O follows its context.
func endsAttempt(st wire.NodeLink_AttemptClient, cancel context.CancelFunc) grpc.ClientStream {
	g, ok := st.(*grpc.GenericClientStream[wire.AttemptUp, wire.AttemptDown])
	if !ok {
		return nil
	}
	e, ok := g.ClientStream.(streamEnd)
	if !ok {
		return nil
	}
	e.AfterEnd(cancel)
	return g.ClientStream
}
