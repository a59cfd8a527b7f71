package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryTable: the summary holds each channel's figures against the
// floor of the same run, marked against that channel's goal, and replaces
// only what stands between the markers of the page.
func TestSummaryTable(t *testing.T) {
	res := resultsOf([]string{"cpu_us_per_req", "cpu_us_per_chunk", "rps64", "ttft64_p50_ms", "kib_per_stream_1000", "truncated"},
		map[string][]float64{
			"naive proxy":      {100, 10, 6000, 20, 57, 0},
			"iop dev tunnel":   {110, 11.5, 5400, 20.5, 70, 0},
			"iop split tunnel": {250, 19, 3000, 22, 90, 0},
		})
	got := summaryTable("test machine", plan{reps: 3, openStreams: []int{1000}}, res)
	summaryHas(t, got,
		"| CPU per JSON request (µs) | 100 | 110, 1.10× ✅ | 250, 2.50× ❌ | ≤ 1.2× / 2× |",
		"| requests/s at c=64 | 6000 | 5400, 0.90× ✅ | 3000, 0.50× ❌ |",
		"| time to first token at 64 streams, p50 (ms) | 20.00 | 20.50, +0.50 ms ✅ | 22.00, +2.00 ms ✅ |",
		"| memory per held stream at 1000 (KiB) | 57.0 | 70.0 ❌ | 90.0 ✅ |",
		"| truncated or malformed streams | 0 | 0 | 0 | 0 / 0 |",
		"Machine: test machine; 3 repetition(s)")
	page := filepath.Join(t.TempDir(), "performance.md")
	_ = os.WriteFile(page, []byte("# Title\n\n"+summaryBegin+"\nold\n"+summaryEnd+"\n\nprose stays\n"), 0o644)
	if err := writeSummary(page, got); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(page)
	if s := string(b); !strings.HasPrefix(s, "# Title\n\n"+summaryBegin) || strings.Contains(s, "old") || !strings.HasSuffix(s, summaryEnd+"\n\nprose stays\n") {
		t.Fatalf("page after the summary was written:\n%s", s)
	}
	_ = os.WriteFile(page, []byte("no markers"), 0o644)
	if err := writeSummary(page, got); err == nil {
		t.Fatal("a page without markers was written")
	}
}

// TestSummaryChainedFloor: the chained floor's column carries its ratios
// to the floor as a reference, with no goal mark.
func TestSummaryChainedFloor(t *testing.T) {
	res := resultsOf([]string{"cpu_us_per_req", "ttft64_p50_ms", "kib_per_stream_1000"}, map[string][]float64{
		"naive proxy":      {100, 20, 57},
		"iop split tunnel": {190, 24, 90},
		chainedFloor:       {210, 31, 110},
	})
	summaryHas(t, summaryTable("test machine", plan{reps: 3, openStreams: []int{1000}}, res),
		"| metric | floor (naive proxy) | split (gateway + node, TCP link) | reference: two naive proxies chained |",
		"| CPU per JSON request (µs) | 100 | 190, 1.90× ✅ | 210, 2.10× |",
		"| time to first token at 64 streams, p50 (ms) | 20.00 | 24.00, +4.00 ms ❌ | 31.00, +11.00 ms |",
		"| memory per held stream at 1000 (KiB) | 57.0 | 90.0 ✅ | 110.0 |")
}

// TestSummarySpread: with several repetitions, a cell carries the lowest
// and highest of its repetitions, each against the floor's figure in the
// same repetition, beside the median's ratio; repetitions whose counts
// differ show none.
func TestSummarySpread(t *testing.T) {
	res := results{}
	for i, rep := range [][4]float64{{100, 20, 120, 23}, {90, 22, 117, 22}, {110, 21, 121, 25}} {
		res.add("naive proxy", "cpu_us_per_req", rep[0])
		res.add("naive proxy", "ttft64_p50_ms", rep[1])
		res.add("iop dev tunnel", "cpu_us_per_req", rep[2])
		res.add("iop dev tunnel", "ttft64_p50_ms", rep[3])
		res.add("naive proxy", "rps64", 6000)
		if i < 2 {
			res.add("iop dev tunnel", "rps64", 5400)
		}
	}
	summaryHas(t, summaryTable("test machine", plan{reps: 3}, res),
		"| CPU per JSON request (µs) | 100 | 120, 1.20× (1.10–1.30×) ✅ |",
		"| requests/s at c=64 | 6000 | 5400, 0.90× ✅ |",
		"| time to first token at 64 streams, p50 (ms) | 21.00 | 23.00, +2.00 ms (+0.00 to +4.00) ❌ |",
		"in brackets, the lowest and highest of the repetitions")
}

// summaryHas fails t for each line the summary lacks.
func summaryHas(t *testing.T, summary string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}

// resultsOf is one sample of each metric for each label, in the metrics'
// order.
func resultsOf(metrics []string, byLabel map[string][]float64) results {
	res := results{}
	for label, v := range byLabel {
		for i, m := range metrics {
			res.add(label, m, v[i])
		}
	}
	return res
}
