package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/internal/konfig"
	"github.com/iopgw/iop/nodeagent"
)

// bundledNodeConfig is the node of an all-in-one gateway file: its node:
// section over the node's defaults, named id (its node_id, else "local"), with a
// fresh token unless it sets one, linked to this edge in process (and to
// any edges it lists, over the network).
func bundledNodeConfig(section map[string]any, id string) (nodeagent.Config, error) {
	nc := nodeagent.DefaultConfig()
	nc.NodeID, nc.Metrics.Listen = id, "" // the gateway's admin listener serves its metrics
	if err := konfig.Decode(section, &nc); err != nil {
		return nc, fmt.Errorf("node: %w", err)
	}
	if nc.Token == "" {
		nc.Token = randomToken()
	}
	nc.Edges = append([]nodeagent.EdgeConfig{{Address: linkInProcess}}, nc.Edges...)
	if err := nc.Resolve(); err != nil {
		return nc, fmt.Errorf("node: %w", err)
	}
	return nc, nil
}

// runWithNode serves g and runs node beside it until ctx ends; at the
// end the edge drains first (its streams finish on the node), then the
// node stops.
func runWithNode(ctx context.Context, g *gateway.Gateway, node *nodeagent.Agent, serve func(context.Context) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	gctx, stopEdge := context.WithCancel(context.Background())
	nctx, stopNode := context.WithCancel(ctx)
	wg.Go(func() { errs <- serve(gctx) })
	wg.Go(func() { errs <- node.Run(nctx) })
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	stopEdge()
	time.AfterFunc(200*time.Millisecond, stopNode)
	wg.Wait()
	stopNode()
	if errors.Is(first, context.Canceled) {
		first = nil
	}
	return first
}

// newBundledNode builds the bundled node, linked to g in process.
func newBundledNode(g *gateway.Gateway, nc nodeagent.Config, log *slog.Logger, reg prometheus.Registerer) (*nodeagent.Agent, error) {
	return nodeagent.New(nc, nodeagent.Options{Log: log, Registerer: reg, NoMetricsServer: true, Version: version,
		Channels: map[string]grpc.ClientConnInterface{linkInProcess: g.Hub().InProcess()}})
}

// bundled is the edge's grant for its bundled node.
func bundled(nc nodeagent.Config) []fleet.NodeConfig {
	return []fleet.NodeConfig{{ID: nc.NodeID, Token: nc.Token}}
}
