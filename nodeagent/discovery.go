package nodeagent

import (
	"context"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"
)

// DefaultResolveInterval is how often a discovered edge set is refreshed.
const DefaultResolveInterval = 30 * time.Second

// lookupHost is the resolver (tests replace it).
var lookupHost = net.DefaultResolver.LookupHost

// discoverEdges keeps one session per address the edge's host name
// resolves to (a Kubernetes headless Service lists every edge pod), adding
// sessions for new addresses and ending those whose address disappeared.
func (a *Agent) discoverEdges(ctx context.Context, e EdgeConfig) error {
	host, port, err := net.SplitHostPort(e.Address)
	if err != nil {
		return err
	}
	interval := e.ResolveInterval
	if interval <= 0 {
		interval = DefaultResolveInterval
	}
	running := map[string]context.CancelFunc{}
	var sessions sync.WaitGroup
	defer sessions.Wait()
	defer func() {
		for _, stop := range running {
			stop()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		addrs, err := lookupHost(ctx, host)
		if err != nil {
			a.log.Warn("edge discovery failed", slog.String("host", host), slog.String("error", err.Error()))
		} else {
			a.reconcileEdges(ctx, e, port, addrs, running, &sessions)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (a *Agent) reconcileEdges(ctx context.Context, e EdgeConfig, port string, addrs []string, running map[string]context.CancelFunc, sessions *sync.WaitGroup) {
	want := map[string]bool{}
	for _, ip := range addrs {
		want[net.JoinHostPort(ip, port)] = true
	}
	for addr, stop := range running {
		if !want[addr] {
			stop()
			delete(running, addr)
			a.log.Info("edge gone from discovery", slog.String("edge", addr))
		}
	}
	keys := make([]string, 0, len(want))
	for addr := range want {
		keys = append(keys, addr)
	}
	sort.Strings(keys)
	for _, addr := range keys {
		if running[addr] != nil {
			continue
		}
		ectx, stop := context.WithCancel(ctx)
		running[addr] = stop
		ec := e
		ec.Address, ec.Resolve = addr, ""
		if ec.TLS.Enabled && ec.TLS.ServerName == "" {
			ec.TLS.ServerName, _, _ = net.SplitHostPort(e.Address)
		}
		sessions.Go(func() {
			if err := a.runEdge(ectx, ec); err != nil {
				a.log.Warn("edge session failed", slog.String("edge", addr), slog.String("error", err.Error()))
			}
		})
		a.log.Info("edge discovered", slog.String("edge", addr))
	}
}
