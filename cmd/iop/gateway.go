package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/gcheadroom"
	"github.com/iopgw/iop/nodeagent"
)

func init() {
	commands["gateway"] = command{summary: "run the edge (--config gateway.yaml)", run: runGateway}
}

func runGateway(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "gateway configuration file (YAML); IOP_* environment variables override it")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	cfg, err := gateway.LoadConfig(*path)
	if err != nil {
		return err
	}
	log, level, flushLog, err := newLogger(stderr, cfg.Log.Level, cfg.Log.Format, cfg.Log.FlushInterval)
	if err != nil {
		return err
	}
	defer flushLog()
	defer gcheadroom.Start(cfg.GCHeadroomBytes)() // the process's, a bundled node's too
	opts := gateway.Options{Log: log, Level: level}
	var nc nodeagent.Config
	if len(cfg.Node) > 0 {
		// All in one: the node: section runs a node in this process.
		if nc, err = bundledNodeConfig(cfg.Node, cfg.BundledNodeID()); err != nil {
			return fmt.Errorf("config %s: %w", *path, err)
		}
		opts.Registry, opts.Bundled = prometheus.NewRegistry(), bundled(nc)
		opts.Log = log.With("component", "edge")
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return err
	}
	stopReloads := watchReloads(ctx, *path, reloadPolicy(cfg.Reload), log, func() { reloadGateway(g, *path, log) })
	defer stopReloads()
	if len(cfg.Node) == 0 {
		return g.Run(ctx)
	}
	node, err := newBundledNode(g, nc, log.With("component", "node"), opts.Registry)
	if err != nil {
		return err
	}
	return runWithNode(ctx, g, node, g.Run)
}

// reloadGateway re-reads path and applies it; an invalid file changes
// nothing.
func reloadGateway(g *gateway.Gateway, path string, log *slog.Logger) {
	err := g.ReloadFile(path)
	switch {
	case err == nil:
	case gateway.IsRestartRequired(err):
		log.Warn("configuration reloaded in part", "error", err.Error(), "generation", g.ConfigGeneration())
	default:
		log.Error("configuration reload rejected; still running the previous configuration", "error", err.Error(),
			"generation", g.ConfigGeneration())
	}
}
