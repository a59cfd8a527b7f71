package main

import (
	"fmt"
	"strings"
)

// The performance goals, checked in every run against the naive proxy
// (the floor) measured in the same run, per channel: co-located (iop dev,
// the in-process channel) and split (an edge and a node, both processes
// summed).
type channelGoals struct {
	cpuPerRequest, cpuPerChunk, rps, addedTTFT float64 // × floor, × floor, × floor, ms over the floor's
	kibPerStream                               float64
}

var (
	colocatedGoals = channelGoals{cpuPerRequest: 1.2, cpuPerChunk: 1.2, rps: 0.85, addedTTFT: 1, kibPerStream: 64}
	splitGoals     = channelGoals{cpuPerRequest: 2.0, cpuPerChunk: 2.0, rps: 0.6, addedTTFT: 3, kibPerStream: 96}
)

// goalsOf are the goals of a variant's channel.
func goalsOf(label string) channelGoals {
	if strings.Contains(label, "split") {
		return splitGoals
	}
	return colocatedGoals
}

const (
	goalTranslateChunk = 2.0 // normalized: CPU per SSE chunk, × floor
	goalIdleRSS        = 30  // MiB per process
	goalGrowth         = 1.2 // how cost grows: iop's ratio at the largest scale ÷ at the smallest
)

// goalTable renders the goals with pass/fail per cell: one row per goal,
// one column per iop system measured in this run.
type goalTable struct {
	pl     plan
	res    results
	labels []string // the iop variants of this run, in column order
	rows   [][]string
	missed int
}

// goals checks the goals against the iop variants measured.
func goals(vs []variant, pl plan, res results, streams, trunc float64) string {
	g := &goalTable{pl: pl, res: res}
	for _, v := range vs {
		if strings.Contains(v.label, "iop ") {
			g.labels = append(g.labels, v.label)
		}
	}
	g.tunnel()
	g.translated()
	g.row("idle RSS per process", fmt.Sprintf("≤ %d MiB", goalIdleRSS), func(l string) (string, bool, bool) {
		v, ok := res.median(l, "idle_rss_max_proc_mb")
		return f(v, ok, "%.1f MiB"), ok, v <= goalIdleRSS
	})
	g.row(fmt.Sprintf("truncated or malformed streams (of %.0f)", streams), "0", func(l string) (string, bool, bool) {
		n, _ := res.sum(l, "truncated", "soak_truncated")
		return fmt.Sprintf("%.0f", n), true, n == 0
	})
	var b strings.Builder
	head := append([]string{"goal", "target"}, g.labels...)
	t := table{head: head, rows: g.rows}
	fmt.Fprintf(&b, "## Goals\n\nEach cell: the measured figure, ✅ met or ❌ missed; — not measured in this run (a quick run skips some). %d cell(s) missed. Truncated streams over every iop run: %.0f of %.0f.\n\n", g.missed, trunc, streams)
	b.WriteString(t.String())
	return b.String()
}

// tunnel adds the passthrough path's goals, each cell against its
// channel's bound.
func (g *goalTable) tunnel() {
	tun := func(l string) bool { return strings.HasSuffix(l, "tunnel") }
	target := func(co, sp float64, format string) string {
		return fmt.Sprintf(format, co) + " co-located, " + fmt.Sprintf(format, sp) + " split"
	}
	g.rowIf(tun, "CPU per JSON request", target(colocatedGoals.cpuPerRequest, splitGoals.cpuPerRequest, "≤ %.1f× floor"),
		g.channelRatio("cpu_us_per_req", func(c channelGoals) float64 { return c.cpuPerRequest }, false))
	g.rowIf(tun, "CPU per SSE chunk", target(colocatedGoals.cpuPerChunk, splitGoals.cpuPerChunk, "≤ %.1f× floor"),
		g.channelRatio("cpu_us_per_chunk", func(c channelGoals) float64 { return c.cpuPerChunk }, false))
	g.rowIf(tun, "requests/s at c=64", target(colocatedGoals.rps, splitGoals.rps, "≥ %.2f× floor"),
		g.channelRatio("rps64", func(c channelGoals) float64 { return c.rps }, true))
	g.rowIf(tun, "added TTFT at 64 streams", target(colocatedGoals.addedTTFT, splitGoals.addedTTFT, "≤ floor's + %.0f ms"), func(l string) (string, bool, bool) {
		v, ok1 := g.res.median(l, "ttft64_p50_ms")
		floor, ok2 := g.res.median(floorLabel, "ttft64_p50_ms")
		d := v - floor
		return f(d, ok1 && ok2, "%+.2f ms"), ok1 && ok2, d <= goalsOf(l).addedTTFT
	})
	for _, n := range g.pl.openStreams {
		key := fmt.Sprintf("kib_per_stream_%d", n)
		g.rowIf(tun, fmt.Sprintf("memory per open stream at %d", n), target(colocatedGoals.kibPerStream, splitGoals.kibPerStream, "≤ %.0f KiB"), func(l string) (string, bool, bool) {
			v, ok := g.res.median(l, key)
			return f(v, ok, "%.1f KiB"), ok, v <= goalsOf(l).kibPerStream
		})
	}
	// How cost grows: nothing may grow faster than the floor does.
	g.rowIf(tun, "CPU per chunk, 1 → 1000 streams: ratio to the floor at the most ÷ at the fewest", fmt.Sprintf("≤ %.1f", goalGrowth), func(l string) (string, bool, bool) {
		if len(g.pl.scale) < 2 {
			return "—", false, false
		}
		lo, ok1 := ratio(g.res, l, floorLabel, fmt.Sprintf("cpu_us_per_chunk_c%d", g.pl.scale[0]))
		hi, ok2 := ratio(g.res, l, floorLabel, fmt.Sprintf("cpu_us_per_chunk_c%d", g.pl.scale[len(g.pl.scale)-1]))
		if !ok1 || !ok2 || lo == 0 {
			return "—", false, false
		}
		return fmt.Sprintf("%.2f (%.2f× → %.2f×)", hi/lo, lo, hi), true, hi/lo <= goalGrowth
	})
	g.rowIf(tun, "CPU per 1 MiB request", target(colocatedGoals.cpuPerRequest, splitGoals.cpuPerRequest, "≤ %.1f× floor"),
		g.channelRatio("cpu_us_per_req_1mib", func(c channelGoals) float64 { return c.cpuPerRequest }, false))
	g.rowIf(tun, "CPU per request on a node serving 50 models", target(colocatedGoals.cpuPerRequest, splitGoals.cpuPerRequest, "≤ %.1f× floor"),
		g.channelRatio("cpu_us_per_req_50models", func(c channelGoals) float64 { return c.cpuPerRequest }, false))
}

// channelRatio measures metric against the floor, bounded by the
// variant's channel goal; atLeast flips the bound.
func (g *goalTable) channelRatio(metric string, bound func(channelGoals) float64, atLeast bool) func(string) (string, bool, bool) {
	return func(l string) (string, bool, bool) {
		v, ok1 := g.res.median(l, metric)
		floor, ok2 := g.res.median(floorLabel, metric)
		if !ok1 || !ok2 || floor == 0 {
			return "—", false, false
		}
		r := v / floor
		met := r <= bound(goalsOf(l))
		if atLeast {
			met = r >= bound(goalsOf(l))
		}
		return fmt.Sprintf("%.2f×", r), true, met
	}
}

// translated adds the normalized path's goals.
func (g *goalTable) translated() {
	norm := func(l string) bool { return strings.HasSuffix(l, "normalized") }
	g.rowIf(norm, "CPU per SSE chunk", fmt.Sprintf("≤ %.1f× floor", goalTranslateChunk), g.ratioCell("cpu_us_per_chunk", goalTranslateChunk, false))
	g.rowIf(norm, "CPU of a JSON request vs the same answer streamed (both at c=64)", "≤ 1.0×", func(l string) (string, bool, bool) {
		req, ok1 := g.res.median(l, "cpu_us_per_req64")
		stream, ok2 := g.res.median(l, "cpu_us_per_stream")
		if !ok1 || !ok2 || stream == 0 {
			return "—", false, false
		}
		r := req / stream
		return fmt.Sprintf("%.2f× (%.0f vs %.0f µs)", r, req, stream), true, r <= 1
	})
}

// ratioCell measures metric against the floor; atLeast flips the bound.
func (g *goalTable) ratioCell(metric string, bound float64, atLeast bool) func(string) (string, bool, bool) {
	return func(l string) (string, bool, bool) {
		r, ok := ratio(g.res, l, floorLabel, metric)
		met := r <= bound
		if atLeast {
			met = r >= bound
		}
		return f(r, ok, "%.2f×"), ok, met
	}
}

func (g *goalTable) row(goal, target string, cell func(label string) (text string, ok, met bool)) {
	g.rowIf(func(string) bool { return true }, goal, target, cell)
}

// rowIf adds a goal row whose cells are measured for the labels applies
// selects (the others read n/a).
func (g *goalTable) rowIf(applies func(string) bool, goal, target string, cell func(label string) (string, bool, bool)) {
	r := []string{goal, target}
	for _, l := range g.labels {
		if !applies(l) {
			r = append(r, "n/a")
			continue
		}
		text, ok, met := cell(l)
		switch {
		case !ok:
			r = append(r, "—")
		case met:
			r = append(r, text+" ✅")
		default:
			g.missed++
			r = append(r, text+" ❌")
		}
	}
	g.rows = append(g.rows, r)
}

// translationNote says what the translated path costs against the
// tunnel in this run, and why.
func translationNote(res results) string {
	var b strings.Builder
	b.WriteString("## What translation costs, and why\n\n")
	b.WriteString("The normalized (translated) path does work the tunnel does not: the node decodes every upstream chunk's JSON into events " +
		"(text, reasoning and tool-call deltas, usage, the answer's identity), joining UTF-16 surrogate pairs an upstream splits across chunks; " +
		"each event crosses the node link as a protobuf message (the events of one upstream read as one message); and the edge renders each " +
		"event in the client's format (Chat chunks appended without reflection, Responses events, Ollama lines), where the tunnel forwards " +
		"the upstream's bytes and only observes them. A non-stream request is asked of the upstream as a stream, so a stall is detected " +
		"while the answer is generated, and is rendered as one JSON answer at the end: it costs about what the same answer streamed costs " +
		"(the goal row below).")
	for _, sys := range []string{"iop dev", "iop split"} {
		n, ok1 := res.median(sys+" normalized", "cpu_us_per_chunk")
		t, ok2 := res.median(sys+" tunnel", "cpu_us_per_chunk")
		if ok1 && ok2 && t > 0 {
			fmt.Fprintf(&b, " In this run, %s: %.1f µs of CPU per chunk translated against %.1f µs tunnelled (%.1f×).", sys, n, t, n/t)
		}
	}
	return b.String() + "\n\n"
}
