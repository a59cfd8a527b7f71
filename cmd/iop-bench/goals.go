package main

import (
	"fmt"
	"strings"
)

// The performance goals, checked in every run against the naive proxy
// (the floor) measured in the same run.
const (
	goalCPUPerRequest  = 1.5 // tunnel: CPU per JSON request, × floor
	goalCPUPerChunk    = 1.3 // tunnel: CPU per SSE chunk, × floor
	goalTranslateChunk = 2.0 // normalized: CPU per SSE chunk, × floor
	goalRPS            = 0.8 // tunnel: requests/s at c=64, × floor
	goalAddedTTFT      = 2.0 // tunnel: added TTFT at 64 streams, ms over the floor's
	goalKiBPerStream   = 64  // tunnel: memory per open stream
	goalIdleRSS        = 30  // MiB per process
)

// goalTable renders the goals with pass/fail per cell: one row per goal,
// one column per iop system measured in this run.
type goalTable struct {
	res    results
	labels []string // the iop variants of this run, in column order
	rows   [][]string
	missed int
}

// goals checks the goals against the iop variants measured.
func goals(vs []variant, res results, streams, trunc float64) string {
	g := &goalTable{res: res}
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
		n := 0.0
		for _, k := range []string{"truncated", "soak_truncated"} {
			for _, x := range res[l][k] {
				n += x
			}
		}
		return fmt.Sprintf("%.0f", n), true, n == 0
	})
	var b strings.Builder
	head := append([]string{"goal", "target"}, g.labels...)
	t := table{head: head, rows: g.rows}
	fmt.Fprintf(&b, "## Goals\n\nEach cell: the measured figure, ✅ met or ❌ missed; — not measured in this run (a quick run skips some). %d cell(s) missed. Truncated streams over every iop run: %.0f of %.0f.\n\n", g.missed, trunc, streams)
	b.WriteString(t.String())
	return b.String()
}

// tunnel adds the passthrough path's goals.
func (g *goalTable) tunnel() {
	tun := func(l string) bool { return strings.HasSuffix(l, "tunnel") }
	g.rowIf(tun, "CPU per JSON request", fmt.Sprintf("≤ %.1f× floor", goalCPUPerRequest), g.ratioCell("cpu_us_per_req", goalCPUPerRequest, false))
	g.rowIf(tun, "CPU per SSE chunk", fmt.Sprintf("≤ %.1f× floor", goalCPUPerChunk), g.ratioCell("cpu_us_per_chunk", goalCPUPerChunk, false))
	g.rowIf(tun, "requests/s at c=64", fmt.Sprintf("≥ %.1f× floor", goalRPS), g.ratioCell("rps64", goalRPS, true))
	g.rowIf(tun, "added TTFT at 64 streams", fmt.Sprintf("≤ floor's + %.0f ms", goalAddedTTFT), func(l string) (string, bool, bool) {
		v, ok1 := g.res.median(l, "ttft64_p50_ms")
		floor, ok2 := g.res.median("naive proxy", "ttft64_p50_ms")
		d := v - floor
		return f(d, ok1 && ok2, "%+.2f ms"), ok1 && ok2, d <= goalAddedTTFT
	})
	for _, n := range []int{1000, 5000} {
		key := fmt.Sprintf("kib_per_stream_%d", n)
		g.rowIf(tun, fmt.Sprintf("memory per open stream at %d", n), fmt.Sprintf("≤ %d KiB", goalKiBPerStream), func(l string) (string, bool, bool) {
			v, ok := g.res.median(l, key)
			return f(v, ok, "%.1f KiB"), ok, v <= goalKiBPerStream
		})
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
		r, ok := ratio(g.res, l, "naive proxy", metric)
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
