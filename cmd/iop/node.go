package main

import (
	"context"
	"flag"
	"io"

	"github.com/iopgw/iop/internal/gcheadroom"
	"github.com/iopgw/iop/nodeagent"
)

func init() {
	commands["node"] = command{summary: "run a node agent (--config node.yaml)", run: runNode}
}

func runNode(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "node configuration file (YAML); IOP_* environment variables override it")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	cfg, err := nodeagent.LoadConfig(*path)
	if err != nil {
		return err
	}
	log, level, _, err := newLogger(stderr, cfg.Log.Level, cfg.Log.Format, 0) // a node writes no line per request
	if err != nil {
		return err
	}
	defer gcheadroom.Start(cfg.GCHeadroomBytes)()
	a, err := nodeagent.New(cfg, nodeagent.Options{Log: log, Version: version, Level: level})
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	stopReloads := watchReloads(rctx, *path, reloadPolicy(cfg.Reload), log, func() {
		next, err := nodeagent.LoadConfig(*path)
		if err == nil {
			err = a.Reload(rctx, next)
		}
		if err != nil {
			log.Error("configuration reload not (fully) applied", "error", err.Error())
		}
	})
	defer stopReloads()
	return a.Run(ctx)
}
