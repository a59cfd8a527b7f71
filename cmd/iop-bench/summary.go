package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// The summary is the one table docs/performance.md carries: the goal
// metrics of both node-link channels (tunnel path, the default) beside the
// floor, from one run. It replaces what stands between the markers.
const (
	summaryBegin = "<!-- iop-bench summary: written by make bench, do not edit -->"
	summaryEnd   = "<!-- end of iop-bench summary -->"
)

// summaryColumns are the systems of the table, floor first; a baseline's
// ("before:") columns follow when the run has them.
func summaryColumns(res results) []string {
	cols := []string{floorLabel}
	for _, prefix := range []string{"", "before: "} {
		for _, l := range []string{"iop dev tunnel", "iop split tunnel"} {
			if len(res[prefix+l]) > 0 {
				cols = append(cols, prefix+l)
			}
		}
		if prefix == "" && len(res[chainedFloor]) > 0 {
			cols = append(cols, chainedFloor)
		}
	}
	return cols
}

// cell is a column's figure v beside the floor's: with its ratio or
// difference (rel), and a mark against the column's goal except in the
// chained floor's column, a reference no goal is set against.
func cell(c, v, rel string, met bool) string {
	if c == chainedFloor {
		return v + ", " + rel
	}
	return v + ", " + rel + " " + mark(met)
}

// summaryTable renders the goal metrics: the floor's absolute figures,
// iop's with their ratio (or difference) to the floor and ✅/❌ against
// the column's channel goal.
func summaryTable(env string, pl plan, res results) string {
	s := summary{res: res, cols: summaryColumns(res)}
	head := []string{"metric"}
	for _, c := range s.cols {
		head = append(head, columnName(c))
	}
	s.t.head = append(head, "goal: co-located / split")
	s.ratioRow("CPU per JSON request (µs)", "cpu_us_per_req", "%.0f", func(c channelGoals) float64 { return c.cpuPerRequest }, false)
	s.ratioRow("CPU per SSE chunk (µs)", "cpu_us_per_chunk", "%.1f", func(c channelGoals) float64 { return c.cpuPerChunk }, false)
	s.ratioRow("requests/s at c=64", "rps64", "%.0f", func(c channelGoals) float64 { return c.rps }, true)
	s.ttftRow()
	for _, n := range pl.openStreams {
		s.memoryRow(n)
	}
	s.truncationRow()

	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nMachine: %s; %d repetition(s), medians. iop dev is the co-located deployment (its node on the in-process channel); iop split an edge and a node in two processes (the TCP link), both summed; the chained floor is two naive proxies in a row, both summed — what the split's extra hop costs done naively, a reference without a goal. Every figure is from the same run as the floor's (the naive `httputil.ReverseProxy`); in brackets, the lowest and highest of the repetitions, each against the floor's figure in the same repetition; the full report is [benchmarks.md](benchmarks.md).\n\n", summaryBegin, env, pl.reps)
	b.WriteString(s.t.String())
	b.WriteString("\n" + summaryEnd)
	return b.String()
}

// summary is the summary's table as its rows are added: one column per
// system (summaryColumns), then the goal.
type summary struct {
	res  results
	cols []string
	t    table
}

// ratioRow adds a metric given as a ratio to the floor's, against a
// bound of each channel's goals (a ceiling, or a floor when atLeast).
func (s *summary) ratioRow(name, metric, format string, bound func(channelGoals) float64, atLeast bool) {
	row := []string{name}
	fv, fok := s.res.median(floorLabel, metric)
	for _, c := range s.cols {
		v, ok := s.res.median(c, metric)
		if c == floorLabel || !ok || !fok || fv == 0 {
			row = append(row, f(v, ok, format))
			continue
		}
		r := v / fv
		met := r <= bound(goalsOf(c))
		if atLeast {
			met = r >= bound(goalsOf(c))
		}
		rel := fmt.Sprintf("%.2f×", r)
		if lo, hi, ok := s.res.spread(c, floorLabel, metric, func(v, f float64) float64 { return v / f }); ok {
			rel += fmt.Sprintf(" (%.2f–%.2f×)", lo, hi)
		}
		row = append(row, cell(c, fmt.Sprintf(format, v), rel, met))
	}
	cmp := "≤"
	if atLeast {
		cmp = "≥"
	}
	s.t.rows = append(s.t.rows, append(row, fmt.Sprintf("%s %.2g× / %.2g×", cmp, bound(colocatedGoals), bound(splitGoals))))
}

// ttftRow adds the time to the first token at 64 streams, as a
// difference from the floor's.
func (s *summary) ttftRow() {
	row := []string{"time to first token at 64 streams, p50 (ms)"}
	fv, fok := s.res.median(floorLabel, "ttft64_p50_ms")
	for _, c := range s.cols {
		v, ok := s.res.median(c, "ttft64_p50_ms")
		if c == floorLabel || !ok || !fok {
			row = append(row, f(v, ok, "%.2f"))
			continue
		}
		rel := fmt.Sprintf("%+.2f ms", v-fv)
		if lo, hi, ok := s.res.spread(c, floorLabel, "ttft64_p50_ms", func(v, f float64) float64 { return v - f }); ok {
			rel += fmt.Sprintf(" (%+.2f to %+.2f)", lo, hi)
		}
		row = append(row, cell(c, fmt.Sprintf("%.2f", v), rel, v-fv <= goalsOf(c).addedTTFT))
	}
	s.t.rows = append(s.t.rows, append(row, fmt.Sprintf("floor + %.0f ms / + %.0f ms", colocatedGoals.addedTTFT, splitGoals.addedTTFT)))
}

// memoryRow adds the memory per held stream with n held, in KiB against
// each channel's bound.
func (s *summary) memoryRow(n int) {
	key := fmt.Sprintf("kib_per_stream_%d", n)
	row := []string{fmt.Sprintf("memory per held stream at %d (KiB)", n)}
	for _, c := range s.cols {
		v, ok := s.res.median(c, key)
		if c == floorLabel || c == chainedFloor || !ok {
			row = append(row, f(v, ok, "%.1f"))
			continue
		}
		row = append(row, fmt.Sprintf("%.1f %s", v, mark(v <= goalsOf(c).kibPerStream)))
	}
	s.t.rows = append(s.t.rows, append(row, fmt.Sprintf("≤ %.0f KiB / ≤ %.0f KiB", colocatedGoals.kibPerStream, splitGoals.kibPerStream)))
}

// truncationRow adds the truncated or malformed streams, summed over the
// repetitions.
func (s *summary) truncationRow() {
	row := []string{"truncated or malformed streams"}
	for _, c := range s.cols {
		n, seen := s.res.sum(c, "truncated", "soak_truncated")
		row = append(row, f(n, seen, "%.0f"))
	}
	s.t.rows = append(s.t.rows, append(row, "0 / 0"))
}

func columnName(label string) string {
	switch strings.TrimPrefix(label, "before: ") {
	case floorLabel:
		return "floor (naive proxy)"
	case chainedFloor:
		return "reference: two naive proxies chained"
	case "iop dev tunnel":
		label = strings.Replace(label, "iop dev tunnel", "co-located (iop dev, in-process channel)", 1)
	case "iop split tunnel":
		label = strings.Replace(label, "iop split tunnel", "split (gateway + node, TCP link)", 1)
	}
	return label
}

func mark(met bool) string {
	if met {
		return "✅"
	}
	return "❌"
}

// writeSummary replaces the summary between the markers of the file at
// path; the file must carry both.
func writeSummary(path, summary string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(summaryBegin)), bytes.Index(doc, []byte(summaryEnd))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q … %q block for the summary", path, summaryBegin, summaryEnd)
	}
	out := append(append(append([]byte{}, doc[:i]...), summary...), doc[j+len(summaryEnd):]...)
	return os.WriteFile(path, out, 0o644)
}
