package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// variant is one system reached one way (iop: normalized or tunnel path).
type variant struct {
	label string
	sys   *system
	key   string // target key: n, t
}

// plan sizes a run.
type plan struct {
	reps                   int
	latRequests            int
	thrDuration            time.Duration
	streamRequests64       int
	streamRequests256      int
	sweep                  []float64 // open-loop rates
	sweepDuration          time.Duration
	openStreams            []int
	truncationStreams      int   // per iop path
	scale                  []int // concurrencies of the CPU-per-chunk scaling run
	bigBodies              int   // 1 MiB requests
	manyModels             int   // requests to a node serving 50 models
	skipSplit, skipPortkey bool
}

func plans(quick bool) plan {
	if quick {
		return plan{reps: 1, latRequests: 300, thrDuration: 2 * time.Second, streamRequests64: 256, openStreams: []int{1000},
			truncationStreams: 2000, skipPortkey: true, scale: []int{1, 100}, bigBodies: 32, manyModels: 1000}
	}
	return plan{reps: 3, latRequests: 1500, thrDuration: 5 * time.Second, streamRequests64: 4096, streamRequests256: 4096,
		sweep: []float64{500, 1000, 2000, 3000}, sweepDuration: 3 * time.Second, openStreams: []int{1000, 10000}, truncationStreams: 50000,
		scale: []int{1, 10, 100, 1000}, bigBodies: 256, manyModels: 5000}
}

// results holds samples per variant and metric, one per repetition.
type results map[string]map[string][]float64

func (r results) add(label, metric string, v float64) {
	if r[label] == nil {
		r[label] = map[string][]float64{}
	}
	r[label][metric] = append(r[label][metric], v)
}

func (r results) median(label, metric string) (float64, bool) {
	vs := r[label][metric]
	if len(vs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2], true
}

// sum adds label's figures of the metrics over every repetition; seen
// is false when there are none.
func (r results) sum(label string, metrics ...string) (n float64, seen bool) {
	for _, m := range metrics {
		for _, x := range r[label][m] {
			n, seen = n+x, true
		}
	}
	return n, seen
}

// spread compares label's figure of metric with base's in each
// repetition (cmp(label's, base's)) and returns the lowest and highest
// comparison; ok is false unless both have as many figures, two or
// more, and base's are not zero.
func (r results) spread(label, base, metric string, cmp func(v, b float64) float64) (lo, hi float64, ok bool) {
	vs, bs := r[label][metric], r[base][metric]
	if len(vs) < 2 || len(vs) != len(bs) {
		return 0, 0, false
	}
	for i, v := range vs {
		if bs[i] == 0 {
			return 0, 0, false
		}
		c := cmp(v, bs[i])
		if i == 0 || c < lo {
			lo = c
		}
		if i == 0 || c > hi {
			hi = c
		}
	}
	return lo, hi, true
}

// runBench is iop-bench run: it starts every system, measures them all in
// one run and writes the report (and the summary, when asked).
func runBench(ctx context.Context, args []string) error {
	f, err := parseRun(args)
	if err != nil {
		return err
	}
	pl := plans(f.quick)
	pl.openStreams = fitOpenStreams(pl.openStreams)
	dir, err := os.MkdirTemp("", "iop-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	variants, stop, err := startSystems(ctx, f, pl, dir)
	defer stop()
	if err != nil {
		return err
	}
	env := environment()
	if f.baseline != "" {
		if out, err := exec.CommandContext(ctx, f.baseline, "version").Output(); err == nil {
			env += fmt.Sprintf("; \"before:\" rows are `%s`, \"iop\" rows `%s`", strings.TrimSpace(string(out)), iopVersion(ctx, f.iop))
		}
	}
	res, err := measure(ctx, variants, pl, f.chunks)
	if err != nil {
		return err
	}
	report := render(env, pl, variants, res, f.chunks)
	if err := writeReport(f.out, report); err != nil {
		return err
	}
	if f.summaryOut != "" {
		return writeSummary(f.summaryOut, summaryTable(env, pl, res))
	}
	return nil
}

// runFlags are the flags of iop-bench run.
type runFlags struct {
	quick                                      bool
	iop, portkeyDir, out, baseline, summaryOut string
	chunks                                     int
}

func parseRun(args []string) (runFlags, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.BoolVar(&f.quick, "quick", false, "a short run (≤ 2 minutes) for development")
	fs.StringVar(&f.iop, "iop", "bin/iop", "the iop binary")
	fs.StringVar(&f.portkeyDir, "portkey", "", "directory with node_modules/@portkey-ai/gateway (empty: skip the peer)")
	fs.StringVar(&f.out, "out", "", "write the Markdown report here (and the plot next to it)")
	fs.IntVar(&f.chunks, "chunks", 32, "content chunks per stream")
	fs.StringVar(&f.baseline, "baseline", "", "an earlier iop binary, measured side by side (variants labelled \"before: …\")")
	fs.StringVar(&f.summaryOut, "summary", "", "also write the goal summary (both channels and the floor) into this Markdown file, between its markers")
	return f, fs.Parse(args)
}

// startSystems starts the upstream and every system the run measures:
// the direct connection, the floor, the chained floor, iop (and the
// baseline's) and the peer. stop stops whatever was started, also when
// err is not nil.
func startSystems(ctx context.Context, f runFlags, pl plan, dir string) (vs []variant, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, stop, err
	}
	up, upAddr, err := startAddr(ctx, "upstream", self, "upstream", "-chunks", fmt.Sprint(f.chunks))
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, up.stop)
	direct := &system{name: "direct", targets: map[string]target{"n": {url: "http://" + upAddr, model: "bench"}, "hold-n": {url: "http://" + upAddr, model: "hold-60"}}}
	startProxy := func(ctx context.Context) (*system, error) {
		px, addr, err := startAddr(ctx, "proxy", self, "proxy", "-upstream", "http://"+upAddr)
		if err != nil {
			return nil, err
		}
		return proxySystem(px, addr), nil
	}
	proxy, err := startProxy(ctx)
	if err != nil {
		return nil, stop, err
	}
	proxy.fresh = startProxy
	stops = append(stops, proxy.stop)
	vs = []variant{{"direct", direct, "n"}, {floorLabel, proxy, "n"}}
	if !pl.skipSplit {
		chain, err := startChain(ctx, self, upAddr)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, chain.stop)
		chain.fresh = func(ctx context.Context) (*system, error) { return startChain(ctx, self, upAddr) }
		vs = append(vs, variant{chainedFloor, chain, "n"})
	}
	for _, b := range []struct{ bin, prefix string }{{f.iop, ""}, {f.baseline, "before: "}} {
		if b.bin == "" {
			continue
		}
		iop, stopIOP, err := iopVariants(ctx, b.bin, dir, upAddr, pl, b.prefix)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, stopIOP)
		vs = append(vs, iop...)
	}
	if pl.skipPortkey || f.portkeyDir == "" {
		return vs, stop, nil
	}
	pk, err := startPortkey(ctx, f.portkeyDir, upAddr)
	switch {
	case errors.Is(err, errNoSystem):
		fmt.Fprintln(os.Stderr, "skipping the peer:", err)
	case err != nil:
		return nil, stop, err
	default:
		stops = append(stops, pk.stop)
		pk.fresh = func(ctx context.Context) (*system, error) { return startPortkey(ctx, f.portkeyDir, upAddr) }
		vs = append(vs, variant{"portkey 1.15.2", pk, "n"})
	}
	return vs, stop, nil
}

// measure runs every scenario against every variant, the order rotated
// each repetition, then the memory, truncation and peak figures.
func measure(ctx context.Context, variants []variant, pl plan, chunks int) (results, error) {
	res := results{}
	for _, v := range variants {
		rss, _ := v.sys.mem()
		res.add(v.label, "idle_rss_mb", float64(rss)/1024)
		res.add(v.label, "idle_rss_max_proc_mb", float64(v.sys.maxProcRSS())/1024)
	}
	// Warm up every system once.
	for _, v := range variants {
		runLoad(ctx, v.sys.targets[v.key], loadSpec{concurrency: 8, requests: 200})
		runLoad(ctx, v.sys.targets[v.key], loadSpec{stream: true, concurrency: 8, requests: 64, chunks: chunks})
	}
	for rep := 0; rep < pl.reps; rep++ {
		order := rotate(variants, rep)
		for _, sc := range scenarios(pl, chunks) {
			for _, v := range order {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				sc.run(ctx, v, res)
			}
		}
		fmt.Fprintf(os.Stderr, "repetition %d/%d done\n", rep+1, pl.reps)
	}
	for _, v := range variants {
		memoryPerStream(ctx, v, pl, res)
	}
	truncationRun(ctx, variants, pl, chunks, res)
	for _, v := range variants {
		_, peak := v.sys.mem()
		res.add(v.label, "peak_rss_mb", float64(peak)/1024)
	}
	return res, nil
}

// writeReport writes the report to out and its plot beside it, or the
// report to standard output when out is empty.
func writeReport(out string, r report) error {
	if out == "" {
		fmt.Print(r.markdown)
		return nil
	}
	if err := os.WriteFile(out, []byte(r.markdown), 0o644); err != nil {
		return err
	}
	return os.WriteFile(svgPath(out), []byte(r.svg), 0o644)
}

// iopVariants starts iop dev (and split, unless the plan skips it) from
// binary bin, labelled with prefix.
func iopVariants(ctx context.Context, bin, dir, upAddr string, pl plan, prefix string) ([]variant, func(), error) {
	dir = freshDir(dir)
	dev, err := startIOPDev(ctx, bin, dir, upAddr)
	if err != nil {
		return nil, nil, err
	}
	dev.fresh = func(ctx context.Context) (*system, error) { return startIOPDev(ctx, bin, freshDir(dir), upAddr) }
	vs := []variant{{prefix + "iop dev normalized", dev, "n"}, {prefix + "iop dev tunnel", dev, "t"}}
	stops := []func(){dev.stop}
	if !pl.skipSplit {
		split, err := startIOPSplit(ctx, bin, dir, upAddr)
		if err != nil {
			dev.stop()
			return nil, nil, err
		}
		split.fresh = func(ctx context.Context) (*system, error) { return startIOPSplit(ctx, bin, freshDir(dir), upAddr) }
		vs = append(vs, variant{prefix + "iop split normalized", split, "n"}, variant{prefix + "iop split tunnel", split, "t"})
		stops = append(stops, split.stop)
	}
	return vs, func() {
		for _, s := range stops {
			s()
		}
	}, nil
}

// iopVersion is what bin says of its version.
func iopVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// floorLabel labels the floor, the naive proxy every ratio of the
// report and the summary is taken against.
const floorLabel = "naive proxy"

// chainedFloor labels two naive proxies in a row, both processes summed:
// what the split's extra hop costs when done naively, the reference
// beside the split's figures (no goal is set against it).
const chainedFloor = "naive proxy, chained"

// startChain starts two naive proxies, the first in front of the second.
func startChain(ctx context.Context, self, upAddr string) (*system, error) {
	back, backAddr, err := startAddr(ctx, "proxy", self, "proxy", "-upstream", "http://"+upAddr)
	if err != nil {
		return nil, err
	}
	front, frontAddr, err := startAddr(ctx, "proxy", self, "proxy", "-upstream", "http://"+backAddr)
	if err != nil {
		back.stop()
		return nil, err
	}
	s := proxySystem(front, frontAddr)
	s.name, s.procs = "two naive ReverseProxies in a row", []*proc{front, back}
	return s, nil
}

func proxySystem(px *proc, addr string) *system {
	return &system{name: "naive ReverseProxy", procs: []*proc{px}, targets: map[string]target{
		"n": {url: "http://" + addr, model: "bench"}, "hold-n": {url: "http://" + addr, model: "hold-60"},
		"t50": {url: "http://" + addr, model: "bench-m25"}}}
}

var freshN atomic.Int32

// freshDir is a new directory under dir for a fresh instance's configs.
func freshDir(dir string) string {
	d := filepath.Join(dir, fmt.Sprintf("fresh-%d", freshN.Add(1)))
	_ = os.MkdirAll(d, 0o700)
	return d
}

func rotate(v []variant, n int) []variant {
	n %= len(v)
	return append(append([]variant(nil), v[n:]...), v[:n]...)
}
