package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// system is one system under test: its processes and how to reach it.
type system struct {
	name    string
	targets map[string]target // by scenario kind: "n" normalized/default, "t" tunnel
	procs   []*proc
	// fresh starts a new, idle instance of the same system, so memory per
	// stream is measured on a process whose heap no earlier scenario grew.
	fresh func(ctx context.Context) (*system, error)
}

func (s *system) pids() []int {
	var out []int
	for _, p := range s.procs {
		out = append(out, p.pid())
	}
	return out
}

func (s *system) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop()
	}
}

func (s *system) cpu() (d int64) {
	for _, pid := range s.pids() {
		d += int64(cpuTime(pid))
	}
	return d
}

func (s *system) mem() (rss, peak int64) {
	for _, pid := range s.pids() {
		r, p := memKB(pid)
		rss += r
		peak += p
	}
	return rss, peak
}

// maxProcRSS is the largest resident set of the system's processes, KiB.
func (s *system) maxProcRSS() (most int64) {
	for _, pid := range s.pids() {
		r, _ := memKB(pid)
		most = max(most, r)
	}
	return most
}

// iopConfigs renders the gateway and node configs that point iop at the
// upstream: provider "n" on the normalized path, "t" on the tunnel.
func iopConfigs(dir, upstream, listen, nodeListen string) (gw, node, dev string) {
	providers := fmt.Sprintf(`
  providers:
    - {id: n, adapter: openai, path: normalized, base_url: "http://%[1]s/v1", models: [bench-n, hold-60-n], capacity: 100000}
    - {id: t, adapter: openai, path: tunnel, base_url: "http://%[1]s/v1", models: [bench-t, hold-60-t], capacity: 100000}
    - {id: t50, adapter: openai, path: tunnel, base_url: "http://%[1]s/v1", models: [%[2]s], capacity: 100000}
`, upstream, fiftyModels())
	gwBody := fmt.Sprintf(`listen: %s
node_listen: %s
admin_listen: ""
nodes: [{id: bench-node, token: bench-token}]
queue: {max_length: 100000}
limits: {write_timeout: 120s}
node_limits: {max_capacity: 100000}
`, listen, nodeListen)
	nodeBody := fmt.Sprintf(`node_id: bench-node
token: bench-token
edges: [{address: "%s"}]
metrics: {listen: ""}
`, nodeListen) + strings.Replace(providers, "\n  providers:", "providers:", 1)
	devBody := fmt.Sprintf(`gateway:
  listen: %s
  admin_listen: ""
  queue: {max_length: 100000}
  limits: {write_timeout: 120s}
  node_limits: {max_capacity: 100000}
node:
`, listen) + providers
	return writeFile(dir, "gateway.yaml", gwBody), writeFile(dir, "node.yaml", nodeBody), writeFile(dir, "dev.yaml", devBody)
}

// fiftyModels are the 50 models of the t50 provider, as a YAML list body.
func fiftyModels() string {
	names := make([]string, 50)
	for i := range names {
		names[i] = fmt.Sprintf("bench-m%02d", i)
	}
	return strings.Join(names, ", ")
}

func iopTargets(url string) map[string]target {
	return map[string]target{"n": {url: url, model: "bench-n"}, "t": {url: url, model: "bench-t"}, "t50": {url: url, model: "bench-m25"},
		"hold-n": {url: url, model: "hold-60-n"}, "hold-t": {url: url, model: "hold-60-t"}}
}

func startIOPDev(ctx context.Context, iop, dir, upstream string) (*system, error) {
	listen := freePort()
	_, _, dev := iopConfigs(dir, upstream, listen, "127.0.0.1:0")
	p, out, err := start(ctx, "iop dev", "", nil, iop, "dev", "--config", dev)
	if err != nil {
		return nil, err
	}
	go drain(out)
	s := &system{name: "iop dev", procs: []*proc{p}, targets: iopTargets("http://" + listen)}
	return s, waitHTTP(ctx, "http://"+listen+"/v1/models", nil)
}

func startIOPSplit(ctx context.Context, iop, dir, upstream string) (*system, error) {
	listen, nodeListen := freePort(), freePort()
	sub := filepath.Join(dir, "split")
	_ = os.MkdirAll(sub, 0o700)
	gw, node, _ := iopConfigs(sub, upstream, listen, nodeListen)
	g, gout, err := start(ctx, "iop gateway", "", nil, iop, "gateway", "--config", gw)
	if err != nil {
		return nil, err
	}
	go drain(gout)
	n, nout, err := start(ctx, "iop node", "", nil, iop, "node", "--config", node)
	if err != nil {
		g.stop()
		return nil, err
	}
	go drain(nout)
	s := &system{name: "iop split", procs: []*proc{g, n}, targets: iopTargets("http://" + listen)}
	return s, waitHTTP(ctx, "http://"+listen+"/v1/models", nil)
}

func startPortkey(ctx context.Context, dir, upstream string) (*system, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js")
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("portkey not installed in %s: %w", dir, errNoSystem)
	}
	addr := freePort()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	p, out, err := start(ctx, "portkey", dir, []string{"NODE_ENV=production"}, "node", script, "--port="+port, "--headless")
	if err != nil {
		return nil, err
	}
	go drain(out)
	h := map[string]string{"x-portkey-provider": "openai", "x-portkey-custom-host": "http://" + upstream + "/v1"}
	s := &system{name: "portkey 1.15.2", procs: []*proc{p}, targets: map[string]target{
		"n": {url: "http://" + addr, headers: h, model: "bench"}, "hold-n": {url: "http://" + addr, headers: h, model: "hold-60"}}}
	return s, waitHTTP(ctx, "http://"+addr+"/", nil)
}

// drain discards a child's stdout so it never blocks on a full pipe.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, r) }
