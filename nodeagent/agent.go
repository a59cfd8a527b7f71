package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/wire"
)

// Options are what a host injects into an Agent.
type Options struct {
	Log        *slog.Logger // default: discard
	Registerer prometheus.Registerer
	// Gatherer serves /metrics; with a nil Registerer the agent makes its
	// own registry and serves that.
	Gatherer prometheus.Gatherer
	// Dialer replaces the network dialer (tests: bufconn).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// ProbeTimeout overrides the 5 s probe bound (tests only).
	ProbeTimeout time.Duration
	// Version is reported to the edge in Hello.
	Version string
	// Level, if set, is the process log level, which Reload changes.
	Level *slog.LevelVar
	// NoMetricsServer disables the /metrics listener (the host serves it).
	NoMetricsServer bool
	// Channels are edges reached in process, by the address their
	// EdgeConfig names: the node runs the same NodeLink client over the
	// channel (an edge's Hub.InProcess) instead of dialing. The node's
	// token is sent as over the network.
	Channels map[string]grpc.ClientConnInterface
}

// Agent is a node agent: providers, the bridge that runs their attempts,
// and one session per configured edge.
type Agent struct {
	cfg      Config
	opts     Options
	log      *slog.Logger
	registry *execution.Registry
	bridge   *Bridge

	mu       sync.Mutex // guards sessions
	sessions map[string]*Session
	draining atomic.Bool
	// closing counts attempt streams the node half-closed after their
	// terminal and the edge has not ended yet: their last messages may
	// still be on their way, so a drain waits for them (see drain).
	closing atomic.Int32
	links   *linkMetrics
	// provMu guards cfg.Providers, which Reload replaces.
	provMu    sync.RWMutex
	malformed *prometheus.CounterVec
	tracer    *tracing.Tracer
}

// New builds an agent from a resolved configuration.
func New(cfg Config, opts Options) (*Agent, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts.Registerer, opts.Gatherer = reg, reg
	}
	malformed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_node_upstream_malformed_events_total",
		Help: "Upstream stream events skipped on the normalized path because they were not the JSON expected; the rest of the answer is delivered.",
	}, []string{"adapter"})
	if err := opts.Registerer.Register(malformed); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	links, err := newLinkMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	registry, err := buildRegistry(cfg, malformed, opts.Log)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, opts: opts, log: opts.Log, registry: registry, sessions: map[string]*Session{}, links: links, malformed: malformed}
	if a.tracer, err = tracing.New(cfg.Tracing, "iop-node"); err != nil {
		return nil, err
	}
	a.bridge = NewBridge(BridgeConfig{
		Registry: registry, Probes: &ProbeCoordinator{Timeout: opts.ProbeTimeout}, Tracer: a.tracer,
		Observer: newLivenessObservability(opts.Registerer, opts.Log), Log: opts.Log, CloseGrace: cfg.Liveness.CloseGrace,
	})
	return a, nil
}

// Gatherer returns the registry the agent's metrics are on (nil when the
// host injected its own Registerer).
func (a *Agent) Gatherer() prometheus.Gatherer { return a.opts.Gatherer }

// Run connects to every edge and serves until ctx ends, then waits for
// in-flight provider work (bounded) and closes the providers.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.registry.Start(ctx); err != nil {
		return err
	}
	defer a.registry.Close()
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.tracer.Shutdown(tctx) // flush the last spans
	}()
	// Sessions and attempts outlive ctx by the drain: when ctx ends the
	// node drains, then work stops.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			a.drain()
		case <-work.Done():
		}
		stop()
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(a.cfg.Edges)+1)
	for _, e := range a.cfg.Edges {
		run := a.runEdge
		if e.Resolve == "dns" {
			run = a.discoverEdges
		}
		wg.Go(func() {
			if err := run(work, e); err != nil {
				errs <- err
			}
		})
	}
	if a.cfg.Metrics.Listen != "" && !a.opts.NoMetricsServer && a.opts.Gatherer != nil {
		wg.Go(func() {
			if err := a.serveMetrics(ctx); err != nil {
				errs <- err
			}
		})
	}
	a.log.Info("node agent started", slog.String("node_id", a.cfg.NodeID), slog.Int("providers", len(a.cfg.Providers)), slog.Int("edges", len(a.cfg.Edges)))
	wg.Wait()
	close(errs)
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.bridge.Wait(wctx)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// drain tells every edge the node is draining — they dispatch no new work
// to it — and waits for in-flight attempts to finish, at most
// DrainTimeout; what is still running then is cancelled by the caller and
// ends with a typed terminal at the edge. An attempt has finished when
// the edge has ended its stream, not when its provider returned: the
// terminal sent last may still be queued in the link's writer, and the
// caller's cancellation would reset the stream and drop it (the edge
// would see the stream cut after its last content).
func (a *Agent) drain() {
	a.draining.Store(true)
	start := time.Now()
	for _, s := range a.liveSessions() {
		if s.State() == StateConnected {
			_ = s.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Draining{Draining: &wire.Draining{}}})
		}
	}
	a.log.Info("node draining: edges dispatch no new work; in-flight attempts may finish", slog.Duration("drain_timeout", a.cfg.DrainTimeout))
	deadline := time.NewTimer(a.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for a.inFlight() > 0 || a.closing.Load() > 0 {
		select {
		case <-deadline.C:
			a.log.Warn("drain timeout passed; ending the remaining attempts with a typed terminal",
				slog.Int("attempts", a.inFlight()+int(a.closing.Load())), slog.Duration("drained_for", time.Since(start)))
			return
		case <-tick.C:
		}
	}
	a.log.Info("node drained", slog.Duration("drained_for", time.Since(start)))
}

// inFlight is the number of attempts running on the node.
func (a *Agent) inFlight() int {
	n := 0
	for _, c := range a.bridge.InFlight() {
		n += int(c)
	}
	return n
}

func (a *Agent) serveMetrics(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.opts.Gatherer, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: a.cfg.Metrics.Listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", a.cfg.Metrics.Listen)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	a.log.Info("node metrics listening", slog.String("addr", ln.Addr().String()))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *Agent) setSession(edge string, s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions[edge] = s
}

// SessionInfo describes the session to one edge.
type SessionInfo struct {
	Edge       string
	State      string
	Generation uint64
}

// Sessions reports the current session to every edge, sorted by edge.
func (a *Agent) Sessions() []SessionInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]SessionInfo, 0, len(a.sessions))
	for edge, s := range a.sessions {
		out = append(out, SessionInfo{Edge: edge, State: s.State(), Generation: s.Generation()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Edge < out[j].Edge })
	return out
}

// liveSessions is a snapshot of the agent's sessions.
func (a *Agent) liveSessions() []*Session {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*Session, 0, len(a.sessions))
	for _, s := range a.sessions {
		out = append(out, s)
	}
	return out
}
