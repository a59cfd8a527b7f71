package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/nodeagent"
)

// threeFleet is 3 edges and 3 nodes on loopback TCP, every node dialing every
// edge, with freezable node links.
type threeFleet struct {
	edges []*fleetEdge
	nodes []*fleetNode
}

type fleetEdge struct {
	cfg     gateway.Config
	url     string
	nodeLn  string
	stop    context.CancelFunc
	done    chan error
	stopped atomic.Bool
}

type fleetNode struct {
	id    string
	stop  context.CancelFunc
	done  chan struct{} // closed when the node agent returned
	mu    sync.Mutex
	conns []*freezable
}

func (n *fleetNode) freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.freeze()
	}
}

func (n *fleetNode) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.thaw()
	}
}

// startEdge starts edge i of the fleet on its node address (reused on a
// restart, so nodes find it again).
func (f *threeFleet) startEdge(t *testing.T, e *fleetEdge) {
	t.Helper()
	g, err := gateway.New(e.cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpLn, nodeLn, _, err := g.Listen()
	if err != nil {
		t.Fatal(err)
	}
	e.url, e.nodeLn = "http://"+httpLn.Addr().String(), nodeLn.Addr().String()
	e.cfg.Listen, e.cfg.NodeListen = httpLn.Addr().String(), nodeLn.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.done = cancel, make(chan error, 1)
	e.stopped.Store(false)
	go func() { e.done <- g.Serve(ctx, httpLn, nodeLn, nil) }()
}

func (f *threeFleet) stopEdge(e *fleetEdge) {
	e.stopped.Store(true)
	e.stop()
	<-e.done
}

func startFleet(t *testing.T) *threeFleet {
	f := &threeFleet{}
	for range 3 {
		cfg := gateway.DefaultConfig()
		cfg.Listen, cfg.NodeListen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0", ""
		cfg.DrainTimeout = 5 * time.Second
		for i := range 3 {
			cfg.Nodes = append(cfg.Nodes, fleet.NodeConfig{ID: fmt.Sprintf("node-%d", i), Token: fmt.Sprintf("token-%d", i)})
		}
		e := &fleetEdge{cfg: cfg}
		f.startEdge(t, e)
		f.edges = append(f.edges, e)
	}
	for i := range 3 {
		n := &fleetNode{id: fmt.Sprintf("node-%d", i)}
		nc := nodeagent.DefaultConfig()
		nc.NodeID, nc.Token, nc.Metrics.Listen, nc.DrainTimeout = n.id, fmt.Sprintf("token-%d", i), "", 5*time.Second
		for _, e := range f.edges {
			nc.Edges = append(nc.Edges, nodeagent.EdgeConfig{Address: e.nodeLn})
		}
		nc.Providers = []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: 40 * time.Millisecond})}
		if err := nc.Resolve(); err != nil {
			t.Fatal(err)
		}
		dial := func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			fc := &freezable{Conn: c}
			n.mu.Lock()
			n.conns = append(n.conns, fc)
			n.mu.Unlock()
			return fc, nil
		}
		a, err := nodeagent.New(nc, nodeagent.Options{NoMetricsServer: true, Dialer: dial})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n.stop, n.done = cancel, make(chan struct{})
		go func() { _ = a.Run(ctx); close(n.done) }()
		f.nodes = append(f.nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range f.nodes {
			n.thaw()
			n.stop()
			<-n.done
		}
		for _, e := range f.edges {
			if !e.stopped.Load() {
				f.stopEdge(e)
			}
		}
	})
	return f
}

// loadRequest streams one chat through edge e for the fleet's load. A
// connection refused by an edge that stopped meanwhile (it was checked
// just before its listener closed) is the load balancer taking it out:
// not sent. Any other transport error fails the test.
func loadRequest(t *testing.T, e *fleetEdge, key string) (sseResult, bool) {
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(streamChatBody("iop-sim")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	switch {
	case err == nil:
		return readSSE(resp), true
	case errors.Is(err, syscall.ECONNREFUSED) && e.stopped.Load():
		return sseResult{}, false
	}
	t.Errorf("edge %s: %v", e.url, err)
	return sseResult{}, false
}

// TestFleetFailures is issue 19's fleet test: 3 edges × 3 nodes with
// streams in flight round-robin over the edges while a node is frozen, a
// node drains and an edge drains and restarts. Every request ends
// complete with the exact text, with a typed terminal, or with a
// documented status (503 while the restarted edge waits for its nodes) —
// never a truncated success. IOP_FLEET_DURATION lengthens the load (make
// soak: 60s).
func TestFleetFailures(t *testing.T) {
	f := startFleet(t)
	duration := 6 * time.Second
	if d, err := time.ParseDuration(os.Getenv("IOP_FLEET_DURATION")); err == nil {
		duration = d
	}
	var want string
	deadline := time.Now().Add(20 * time.Second)
	for want == "" || len(want) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not come up")
		}
		if r := streamChat(t, f.edges[0].url, "iop-sim"); r.status == 200 && r.done == 1 {
			want = r.text
		}
		time.Sleep(50 * time.Millisecond)
	}

	var mu sync.Mutex
	kinds := map[string]int{}
	ctx, stopLoad := context.WithTimeout(context.Background(), duration)
	defer stopLoad()
	var load sync.WaitGroup
	var next atomic.Int64
	for range 30 {
		load.Go(func() {
			for ctx.Err() == nil {
				e := f.edges[int(next.Add(1))%len(f.edges)]
				if e.stopped.Load() {
					continue // the load balancer has taken it out
				}
				// As an SDK's retries do, the request names itself
				// idempotent: one sent on a kept-alive connection that a
				// draining edge closed before reading it is sent again
				// (net/http retries only such requests).
				r, sent := loadRequest(t, e, fmt.Sprintf("fleet-%d", next.Load()))
				if !sent {
					continue
				}
				k := classify(t, r, want)
				if k == "status" && r.status != 503 {
					t.Errorf("status %d: %+v", r.status, r)
				}
				mu.Lock()
				kinds[k]++
				mu.Unlock()
			}
		})
	}
	step := duration / 6
	time.Sleep(step)
	f.nodes[0].freeze() // node-0 frozen for the rest of the run
	time.Sleep(step)
	f.nodes[1].stop() // node-1 drains and exits
	time.Sleep(step)
	drainStart := time.Now()
	f.stopEdge(f.edges[2]) // edge-2 drains…
	drained := time.Since(drainStart)
	time.Sleep(step)
	f.startEdge(t, f.edges[2]) // …and comes back on the same node address
	load.Wait()
	<-f.nodes[1].done
	t.Logf("fleet: %v requests by outcome; edge-2 drained in %v", kinds, drained.Round(10*time.Millisecond))
	if kinds["bad"] != 0 || kinds["complete"] < 30 {
		t.Fatalf("outcomes %v", kinds)
	}
}
