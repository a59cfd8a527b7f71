package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/nodeagent"
)

// TestMultiEdgeScaleOut runs 3 edges and 3 nodes on loopback TCP; every
// node lists every edge and keeps one session per edge. Requests go
// through every edge; one edge is killed mid-load; the other two keep
// serving, and the only failed requests are those in flight on the killed
// edge.
func TestMultiEdgeScaleOut(t *testing.T) {
	type edge struct {
		g      *gateway.Gateway
		url    string
		stop   context.CancelFunc
		done   chan error
		nodeLn string
	}
	var edges []*edge
	for range 3 {
		cfg := gateway.DefaultConfig()
		cfg.Listen, cfg.NodeListen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0", ""
		cfg.DrainTimeout = 200 * time.Millisecond
		for i := range 3 {
			cfg.Nodes = append(cfg.Nodes, fleet.NodeConfig{ID: fmt.Sprintf("node-%d", i), Token: fmt.Sprintf("token-%d", i)})
		}
		g, err := gateway.New(cfg, gateway.Options{})
		if err != nil {
			t.Fatal(err)
		}
		httpLn, nodeLn, _, err := g.Listen()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		e := &edge{g: g, url: "http://" + httpLn.Addr().String(), stop: cancel, done: make(chan error, 1), nodeLn: nodeLn.Addr().String()}
		go func() { e.done <- g.Serve(ctx, httpLn, nodeLn, nil) }()
		edges = append(edges, e)
	}
	t.Cleanup(func() {
		for _, e := range edges {
			e.stop()
			<-e.done
		}
	})
	var nodeStops []context.CancelFunc
	for i := range 3 {
		nc := nodeagent.DefaultConfig()
		nc.NodeID, nc.Token, nc.Metrics.Listen = fmt.Sprintf("node-%d", i), fmt.Sprintf("token-%d", i), ""
		for _, e := range edges {
			nc.Edges = append(nc.Edges, nodeagent.EdgeConfig{Address: e.nodeLn})
		}
		nc.Providers = []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: 5 * time.Millisecond})}
		if err := nc.Resolve(); err != nil {
			t.Fatal(err)
		}
		a, err := nodeagent.New(nc, nodeagent.Options{NoMetricsServer: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		nodeStops = append(nodeStops, func() { cancel(); <-done })
	}
	t.Cleanup(func() {
		for _, s := range nodeStops {
			s()
		}
	})
	for _, e := range edges {
		deadline := time.Now().Add(10 * time.Second)
		for len(e.g.Pool().Snapshot()) != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("edge %s sees %d providers, want one per node", e.url, len(e.g.Pool().Snapshot()))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	body := `{"model":"iop-sim","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	// Load through every edge; kill edge 0 in the middle.
	var ok, failedOnKilled, failedElsewhere atomic.Int32
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	for i, e := range edges {
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stopLoad:
						return
					default:
					}
					resp, err := http.Post(e.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
					success := false
					if err == nil {
						r := collect(resp)
						success = r.status == 200 && r.done == 1
					}
					switch {
					case success:
						ok.Add(1)
					case i == 0:
						failedOnKilled.Add(1)
						time.Sleep(20 * time.Millisecond)
					default:
						failedElsewhere.Add(1)
					}
				}
			})
		}
	}
	time.Sleep(500 * time.Millisecond)
	before := ok.Load()
	edges[0].stop()
	<-edges[0].done
	edges[0].done <- nil // for cleanup
	time.Sleep(700 * time.Millisecond)
	close(stopLoad)
	wg.Wait()
	after := ok.Load() - before
	t.Logf("%d requests succeeded (%d after the kill), %d failed on the killed edge, %d failed elsewhere", ok.Load(), after, failedOnKilled.Load(), failedElsewhere.Load())
	if failedElsewhere.Load() != 0 {
		t.Fatalf("%d requests failed on the surviving edges", failedElsewhere.Load())
	}
	if after == 0 {
		t.Fatal("the surviving edges served nothing after the kill")
	}
	// The surviving edges still see all three nodes.
	for _, e := range edges[1:] {
		if n := len(e.g.Pool().Snapshot()); n != 3 {
			t.Fatalf("surviving edge sees %d providers", n)
		}
	}
}
