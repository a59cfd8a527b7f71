package main

import (
	"context"
	"flag"
	"io"

	"github.com/iopgw/iop/gateway"
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
	log, err := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	g, err := gateway.New(cfg, gateway.Options{Log: log})
	if err != nil {
		return err
	}
	return g.Run(ctx)
}
