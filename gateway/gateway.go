// Package gateway is the edge: the HTTP surface (echo) for OpenAI and
// Ollama clients, the node hub (gRPC server) nodes dial, the provider pool
// and its queues, immutable dispatch leases, the runtime health overlay
// and its recovery probes, provider snapshots, admin endpoints and client
// authentication. Each request is handed to one streamgate runtime, which
// owns its liveness; gateway implements streamgate's Dispatcher.
package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/gateway/stored"
	"github.com/iopgw/iop/gateway/tenancy"
	"github.com/iopgw/iop/internal/slogx"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

// Options are what a host injects into a Gateway.
type Options struct {
	Log *slog.Logger
	// Registry receives the edge's collectors; nil makes a fresh one.
	// /metrics serves it together with the process-global default registry
	// (Go and process collectors, streamgate's collectors).
	Registry *prometheus.Registry
	// Listeners replace the configured addresses (tests, iop dev).
	HTTPListener, NodeListener, AdminListener net.Listener
	// Clock for the request runtime (tests).
	Clock streamgate.Clock
	// Level, if set, is the process log level, which Reload changes.
	Level *slog.LevelVar
	// Bundled are nodes running in this process (iop dev, iop gateway
	// with a node section), allowed to connect in addition to the
	// configured nodes, whatever a reload says.
	Bundled []fleet.NodeConfig
}

// Gateway is one edge.
type Gateway struct {
	gen     atomic.Pointer[generation] // the running configuration; replaced whole, in one step, by Reload
	models  modelStats
	opts    Options
	log     *slog.Logger
	reg     *prometheus.Registry
	pool    *pool.Pool
	hub     *fleet.Hub
	auth    *tenancy.Authenticator
	metrics *edgeMetrics
	reloads *prometheus.CounterVec
	corsMW  corsState
	tenants *tenancy.Tenants  // per-key limits and usage
	stored  *stored.Responses // where stored responses are kept
	// adminFails throttles failed admin authentications per address;
	// adminLog logs them, sampled.
	adminFails tenancy.FailLimiter
	adminLog   *slogx.Sampled
	tracer     *tracing.Tracer
	keys       *keyMetrics // per-key counters
	// sgMetrics are the request runtime's collectors (kept across reloads).
	sgMetrics *streamgate.Metrics
	health    *pool.HealthObservability
	events    *pool.EventLog
	started   time.Time
	echo      *echo.Echo

	drain     context.Context // done when the drain deadline passes
	drainNow  context.CancelFunc
	mu        sync.Mutex
	httpSrv   *http.Server
	adminSrv  *http.Server
	grpcSrv   *grpc.Server
	ready     bool
	listeners map[string]net.Addr
}

// New builds an edge from a validated configuration.
func New(cfg Config, opts Options) (*Gateway, error) {
	cfg.Nodes = append(slices.Clone(cfg.Nodes), opts.Bundled...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if cfg.EdgeID == "" {
		cfg.EdgeID, _ = os.Hostname()
	}
	g := &Gateway{opts: opts, log: opts.Log, reg: opts.Registry, started: time.Now(), listeners: map[string]net.Addr{}, stored: stored.New(0)}
	cfg.resolvePolicies()
	g.gen.Store(&generation{n: 1, cfg: &cfg})
	g.drain, g.drainNow = context.WithCancel(context.Background())
	g.events = pool.NewEventLog()
	g.health = pool.NewHealthObservability(g.reg, g.log, g.events)
	g.newFleet(&cfg)
	if err := g.newRuntime(&cfg); err != nil {
		return nil, err
	}
	if err := g.newTenancy(&cfg); err != nil {
		return nil, err
	}
	g.echo = g.newEcho()
	return g, nil
}

// withBundled is nodes and the bundled nodes.
func (g *Gateway) withBundled(nodes []fleet.NodeConfig) []fleet.NodeConfig {
	return append(slices.Clone(nodes), g.opts.Bundled...)
}

// newFleet builds the pool, its metrics and the hub nodes connect to.
func (g *Gateway) newFleet(cfg *Config) {
	g.pool = pool.NewPool(pool.PoolConfig{Queue: g.queueConfig, Policy: g.providerPolicy, Observer: g.health, Overlay: cfg.Overlay, Outlier: cfg.Outlier,
		Aliases: func(model string) []pool.ModelTarget { return g.config().aliasTargets(model) }, Registerer: g.reg})
	g.metrics = newEdgeMetrics(g.reg)
	g.hub = fleet.NewHub(fleet.HubConfig{Nodes: cfg.Nodes, Pool: g.pool, Log: g.log, Registerer: g.reg, EdgeID: cfg.EdgeID, MTLS: cfg.NodeTLS.ClientCAFile != "",
		Limits: &cfg.NodeLimits, Link: &cfg.NodeLink, DrainTimeout: cfg.DrainTimeout, ProbeOnConnect: true})
}

// newRuntime builds tracing and the request runtime's configuration.
func (g *Gateway) newRuntime(cfg *Config) error {
	var err error
	if g.tracer, err = tracing.New(cfg.Tracing, "iop-edge"); err != nil {
		return err
	}
	if g.sgMetrics, err = streamgate.NewMetrics(g.reg); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	budget := streamgate.NewBudget(streamgate.BudgetConfig{Ratio: cfg.StreamGate.BudgetRatio, MinConcurrent: cfg.StreamGate.BudgetMin}, g.opts.Clock)
	sg, err := g.runtimeConfig(cfg, budget)
	if err != nil {
		return err
	}
	g.gen.Store(&generation{n: 1, cfg: cfg, sg: sg})
	g.newConfigMetrics()
	g.corsMW.set(cfg.CORS)
	return nil
}

// newTenancy builds client authentication, per-key limits (shared in
// Redis when configured) and their usage file.
func (g *Gateway) newTenancy(cfg *Config) error {
	g.auth = tenancy.NewAuthenticator(cfg.Auth.settings())
	g.adminFails.Limit = func() int { return cmp.Or(max(0, g.config().Auth.FailuresPerMinute), 20) }
	g.adminLog = slogx.NewSampled(g.log, 10*time.Second)
	g.tenants = tenancy.New(cfg.Auth.Keys, nil)
	if cfg.Auth.UsageFile != "" {
		if err := g.tenants.LoadUsage(cfg.Auth.UsageFile); err != nil {
			return fmt.Errorf("auth.usage_file: %w", err)
		}
	}
	g.keys = newKeyMetrics(g.reg)
	if ls := cfg.Auth.LimitsStore; ls.Redis != "" {
		warn := slogx.NewSampled(g.log, 10*time.Second)
		g.tenants.UseSharedStore(ls, os.Getenv(ls.PasswordEnv), func(err error) {
			g.keys.storeErrors.Inc()
			warn.Warn("the limits store did not answer; applying auth.limits_store.failure", "failure", cmp.Or(ls.Failure, "open"),
				"error", err.Error())
		})
	}
	return nil
}

// closeTenancy settles what is left of tenancy at shutdown: settlements
// to the shared store finish and its client closes, and the usage file
// is written a last time.
func (g *Gateway) closeTenancy() {
	if err := g.tenants.Close(); err != nil {
		g.log.Warn("closing the limits store failed", "error", err.Error())
	}
	if path := g.config().Auth.UsageFile; path != "" {
		if err := g.tenants.SaveUsage(path); err != nil {
			g.log.Error("saving the usage file failed", "error", err.Error())
		}
	}
}

// config is the running configuration, for what is not a request (the
// admin API, the pool's status, listeners).
func (g *Gateway) config() *Config { return g.gen.Load().cfg }

// runtimeConfig is the request runtime's configuration for cfg, sharing
// budget (its counters survive a reload).
func (g *Gateway) runtimeConfig(cfg *Config, budget *streamgate.Budget) (*streamgate.Config, error) {
	filter, err := streamgate.NewFilter(filterRules(cfg.StreamGate.Filter))
	if err != nil {
		return nil, err
	}
	sg := streamgate.Config{
		Dispatcher: &fleet.Dispatcher{Pool: g.pool, Hub: g.hub, Tracer: g.tracer, Aliases: cfg.aliasTargets, Queue: cfg.queueConfig}, Clock: g.opts.Clock, Log: g.log, Filter: filter, Drain: g.drain,
		MaxAttempts: cfg.StreamGate.MaxAttempts, WriteTimeout: cfg.Limits.WriteTimeout,
		Hold:           streamgate.HoldConfig{MaxDelay: cfg.StreamGate.HoldMaxDelay, MaxEvents: cfg.StreamGate.HoldMaxEvents},
		Policy:         cfg.RetryPolicy, // this generation's, for every request that runs under it
		BackstopMargin: cfg.StreamGate.BackstopMargin,
		Budget:         budget,
		Metrics:        g.sgMetrics,
	}.WithDefaults()
	return &sg, nil
}

func filterRules(f FilterConfig) []streamgate.FilterRule {
	if !f.Enabled {
		return nil
	}
	return f.Rules
}

func (g *Gateway) queueConfig(model string) pool.QueueConfig { return g.config().queueConfig(model) }

// queueConfig is model's queue: its own settings over the gateway's.
func (c *Config) queueConfig(model string) pool.QueueConfig {
	q := c.model(model).Queue
	if q.MaxLength <= 0 {
		q.MaxLength = c.Queue.MaxLength
	}
	if q.MaxWait <= 0 {
		q.MaxWait = c.Queue.MaxWait
	}
	return q
}

func (g *Gateway) providerPolicy(id string) pool.ProviderPolicy {
	for _, p := range g.config().Providers {
		if p.ID == id {
			return p
		}
	}
	return pool.ProviderPolicy{}
}

// Pool returns the provider pool.
func (g *Gateway) Pool() *pool.Pool { return g.pool }

// Gatherer is the registry the edge's metrics are on.
func (g *Gateway) Gatherer() prometheus.Gatherer { return g.reg }

// Hub returns the node link hub.
func (g *Gateway) Hub() *fleet.Hub { return g.hub }

func (g *Gateway) listen(name, addr string, ln net.Listener) (net.Listener, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("%s listener: %w", name, err)
		}
	}
	g.mu.Lock()
	g.listeners[name] = ln.Addr()
	g.mu.Unlock()
	return ln, nil
}

// Listen binds every listener (so their addresses are known before Serve).
func (g *Gateway) Listen() (httpLn, nodeLn, adminLn net.Listener, err error) {
	if httpLn, err = g.listen("http", g.config().Listen, g.opts.HTTPListener); err != nil {
		return
	}
	if nodeLn, err = g.listen("node", g.config().NodeListen, g.opts.NodeListener); err != nil {
		httpLn.Close()
		return
	}
	nodeLn = fleet.LimitConns(nodeLn, g.config().NodeLimits.MaxConnsPerSource, g.config().NodeLimits.MaxConns, g.log)
	if g.config().AdminListen != "" || g.opts.AdminListener != nil {
		if adminLn, err = g.listen("admin", g.config().AdminListen, g.opts.AdminListener); err != nil {
			httpLn.Close()
			nodeLn.Close()
		}
	}
	return
}

// Run serves until ctx ends, then shuts down gracefully: new requests are
// refused, in-flight streams get DrainTimeout to finish, nodes see a
// GOAWAY.
func (g *Gateway) Run(ctx context.Context) error {
	httpLn, nodeLn, adminLn, err := g.Listen()
	if err != nil {
		return err
	}
	return g.Serve(ctx, httpLn, nodeLn, adminLn)
}

// Serve serves on already-bound listeners until ctx ends.
func (g *Gateway) Serve(ctx context.Context, httpLn, nodeLn, adminLn net.Listener) error {
	creds, err := g.nodeCreds()
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.grpcSrv = grpc.NewServer(g.hub.ServerOptions(creds)...)
	wire.RegisterNodeLinkServer(g.grpcSrv, g.hub)
	g.httpSrv = g.newHTTPServer(g.echo)
	if adminLn != nil {
		g.adminSrv = g.newHTTPServer(g.adminHandler())
	}
	g.ready = true
	g.mu.Unlock()

	errc := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Go(func() { errc <- ignoreClosed(g.grpcSrv.Serve(nodeLn)) })
	wg.Go(func() { errc <- ignoreClosed(g.serveHTTP(g.httpSrv, httpLn)) })
	if adminLn != nil {
		wg.Go(func() { errc <- ignoreClosed(g.adminSrv.Serve(adminLn)) })
	}
	pctx, stopProbes := context.WithCancel(ctx)
	wg.Go(func() { g.hub.RunRecoveryProbes(pctx) })
	if path := g.config().Auth.UsageFile; path != "" {
		wg.Go(func() { g.tenants.KeepUsage(pctx, path, g.log) })
	}
	admin := ""
	if adminLn != nil {
		admin = adminLn.Addr().String()
	}
	g.log.Info("edge listening", "http", httpLn.Addr().String(), "node", nodeLn.Addr().String(), "admin", admin,
		"config_generation", g.gen.Load().n)

	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	stopProbes()
	g.shutdown()
	wg.Wait()
	g.closeTenancy() // after the drain: every request has settled
	tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.tracer.Shutdown(tctx); err != nil {
		g.log.Warn("flushing traces failed", "error", err.Error())
	}
	return first
}

func ignoreClosed(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// newHTTPServer applies the server limits: a header timeout and size
// bound, an idle timeout, no WriteTimeout (it would kill long streams;
// the runtime sets per-write deadlines instead), and, for HTTP/2 over TLS,
// an explicit bound of 250 concurrent streams per connection.
func (g *Gateway) newHTTPServer(h http.Handler) *http.Server {
	l := g.config().Limits
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		// The server's own bound is a backstop (it answers plain text);
		// observe answers the configured one in the surface's shape.
		MaxHeaderBytes: 2*l.MaxHeaderBytes + 4096,
		IdleTimeout:    l.IdleTimeout,
		HTTP2:          &http.HTTP2Config{MaxConcurrentStreams: 250},
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
}

func (g *Gateway) serveHTTP(srv *http.Server, ln net.Listener) error {
	if g.config().TLS.CertFile != "" {
		return srv.ServeTLS(ln, g.config().TLS.CertFile, g.config().TLS.KeyFile)
	}
	return srv.Serve(ln)
}

// nodeCreds returns the node link's TLS credentials (nil: plaintext).
func (g *Gateway) nodeCreds() (credentials.TransportCredentials, error) {
	t := g.config().NodeTLS
	if t.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("node_tls: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("node_tls.client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("node_tls.client_ca_file: no certificates")
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(tc), nil
}

// shutdown stops accepting work and drains.
func (g *Gateway) shutdown() {
	g.mu.Lock()
	g.ready = false
	httpSrv, adminSrv, grpcSrv := g.httpSrv, g.adminSrv, g.grpcSrv
	g.mu.Unlock()
	g.hub.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), g.config().DrainTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(ctx); err != nil {
		// Streams still open get a typed terminal, then their connections close.
		g.log.Warn("drain deadline passed; ending remaining streams with a typed terminal")
		g.drainNow()
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := httpSrv.Shutdown(fctx); err != nil {
			_ = httpSrv.Close()
		}
		fcancel()
	}
	g.drainNow()
	if adminSrv != nil {
		_ = adminSrv.Close()
	}
	// HTTP has drained, so no attempt is left on the node link: close the
	// node sessions now (GracefulStop would wait on them, which never end
	// by themselves) and wait for their readers.
	grpcSrv.Stop()
	g.hub.Wait()
}
