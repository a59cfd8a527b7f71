package e2e

import (
	"context"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// startRedis runs a real redis-server on a free loopback port for the test.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is required (Debian package redis-server; .ci/run installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); rdb.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
	return addr
}

// TestSharedLimitAcrossEdges: three edges share one key's limit of 12
// requests per window through Redis: 18 requests spread over them get
// exactly 12 answers and 6 429s. With Redis gone, the default fail-open
// admits and counts the store errors.
func TestSharedLimitAcrossEdges(t *testing.T) {
	addr := startRedis(t)
	const window = 5 * time.Second
	var edges []*Cluster
	for range 3 {
		edges = append(edges, Start(t, Options{Gateway: func(g *gateway.Config) {
			g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{RequestsPerMinute: 12}}}
			// A store call slower than Timeout fails open (admits): give a
			// loaded machine room, or the count is off by those.
			g.Auth.LimitsStore = gateway.LimitStoreConfig{Redis: addr, Window: window, Timeout: 2 * time.Second}
		}, Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}}, nil))
	}
	// Start at the beginning of a window, so all 18 fall in one.
	time.Sleep(time.Until(time.Now().Truncate(window).Add(window)))
	codes := make(chan int, 18)
	var wg sync.WaitGroup
	for i := range 18 {
		wg.Go(func() {
			resp := chatAs(t, edges[i%3].URL, "sk-a", false)
			readAll(t, resp)
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[200] != 12 || count[429] != 6 {
		t.Fatalf("three edges sharing a limit of 12: %v", count)
	}
	// Redis gone: fail open.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	_ = rdb.Shutdown(context.Background()).Err()
	rdb.Close()
	resp := chatAs(t, edges[0].URL, "sk-a", false)
	if readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("with the store down (fail open): %d", resp.StatusCode)
	}
	if v := edges[0].Metric(t, "iop_edge_limit_store_errors_total", nil); v < 1 {
		t.Fatalf("store errors counted: %v", v)
	}

}
