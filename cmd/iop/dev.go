package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/gcheadroom"
	"github.com/iopgw/iop/internal/konfig"
	"github.com/iopgw/iop/nodeagent"
)

func init() {
	commands["dev"] = command{summary: "run an edge and a bundled node with sim providers in one process", run: runDev}
}

// devConfig is iop dev's configuration: a gateway and its bundled node.
type devConfig struct {
	Gateway gateway.Config   `koanf:"gateway"`
	Node    nodeagent.Config `koanf:"node"`
	// Link is how the bundled node reaches the edge: in-process (default:
	// the edge's NodeLink service called in process, no socket) or tcp
	// (a loopback connection to the node listener, as a remote node).
	Link string `koanf:"link"`
}

// The bundled node's links.
const (
	linkInProcess = "in-process"
	linkTCP       = "tcp"
)

// defaultDevConfig serves the model iop-sim from two sim providers — one
// on the default path (auto: the sim serves Chat and Responses natively, so
// those are tunnelled), one translating every request — on 127.0.0.1:8080,
// with the
// admin listener on 127.0.0.1:8081 and the node link on a free loopback
// port.
func defaultDevConfig() devConfig {
	g := gateway.DefaultConfig()
	g.NodeListen = "127.0.0.1:0"
	g.Log.Format = "text"
	n := nodeagent.DefaultConfig()
	n.NodeID = "dev-node"
	n.Log.Format = "text"
	n.Metrics.Listen = ""
	return devConfig{Gateway: g, Node: n, Link: linkInProcess}
}

func defaultDevProviders() []nodeagent.ProviderConfig {
	return []nodeagent.ProviderConfig{
		{ID: "sim-a", Adapter: "sim", Path: nodeagent.PathNormalized, Models: []string{"iop-sim"}, Capacity: 8},
		{ID: "sim-b", Adapter: "sim", Models: []string{"iop-sim"}, Capacity: 8},
	}
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "dev configuration (YAML with gateway: and node: sections); see configs/dev-*.yaml")
	listen := fs.String("listen", "", "public HTTP address (default 127.0.0.1:8080)")
	admin := fs.String("admin", "", "admin listener address (default 127.0.0.1:8081; \"\" in the config disables it)")
	link := fs.String("link", "", "how the bundled node reaches the edge: in-process (default) or tcp")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	cfg := defaultDevConfig()
	if err := konfig.Load(*path, &cfg); err != nil {
		return err
	}
	if *listen != "" {
		cfg.Gateway.Listen = *listen
	}
	if *admin != "" {
		cfg.Gateway.AdminListen = *admin
	}
	if *link != "" {
		cfg.Link = *link
	}
	return runDevConfig(ctx, cfg, stdout, stderr)
}

func runDevConfig(ctx context.Context, cfg devConfig, stdout, stderr io.Writer) error {
	cfg.Node.Token = randomToken()
	if len(cfg.Node.Providers) == 0 {
		cfg.Node.Providers = defaultDevProviders()
	}
	log, _, flushLog, err := newLogger(stderr, cfg.Gateway.Log.Level, cfg.Gateway.Log.Format, cfg.Gateway.Log.FlushInterval)
	if err != nil {
		return err
	}
	defer flushLog()
	// The collector's headroom is the process's: the edge's and the node's.
	defer gcheadroom.Start(cfg.Gateway.GCHeadroomBytes)()
	reg := prometheus.NewRegistry() // served with the default registry (Go and process collectors)
	g, err := gateway.New(cfg.Gateway, gateway.Options{Log: log.With("component", "edge"), Registry: reg, Bundled: bundled(cfg.Node)})
	if err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	httpLn, nodeLn, adminLn, err := g.Listen()
	if err != nil {
		return err
	}
	node, err := devNode(g, cfg, nodeLn.Addr().String(), log.With("component", "node"), reg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "iop dev: OpenAI API on http://%s/v1 (models %s), Ollama API on http://%s/api", httpLn.Addr(),
		strings.Join(devModels(cfg.Node.Providers), ", "), httpLn.Addr())
	if adminLn != nil {
		fmt.Fprintf(stdout, ", admin on http://%s (status page http://%s/status)", adminLn.Addr(), adminLn.Addr())
	}
	fmt.Fprintln(stdout)
	return runWithNode(ctx, g, node, func(ctx context.Context) error { return g.Serve(ctx, httpLn, nodeLn, adminLn) })
}

// devNode is the bundled node on cfg.Link: the edge's in-process channel,
// or a loopback connection to its node listener at nodeAddr.
func devNode(g *gateway.Gateway, cfg devConfig, nodeAddr string, log *slog.Logger, reg prometheus.Registerer) (*nodeagent.Agent, error) {
	switch cfg.Link {
	case linkInProcess, "":
		cfg.Node.Edges = []nodeagent.EdgeConfig{{Address: linkInProcess}}
	case linkTCP:
		cfg.Node.Edges = []nodeagent.EdgeConfig{{Address: nodeAddr}}
	default:
		return nil, fmt.Errorf("link: %q is not in-process or tcp", cfg.Link)
	}
	if err := cfg.Node.Resolve(); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	if cfg.Link == linkTCP {
		return nodeagent.New(cfg.Node, nodeagent.Options{Log: log, Registerer: reg, NoMetricsServer: true, Version: version})
	}
	return newBundledNode(g, cfg.Node, log, reg)
}

func devModels(ps []nodeagent.ProviderConfig) []string {
	var out []string
	for _, p := range ps {
		for _, m := range p.Models {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
