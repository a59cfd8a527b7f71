package main

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/konfig"
)

// TestDevExportsEverySeriesOnce guards the deviation documented in
// docs/conformance.md ("collectors registered per instance"): the running
// binary registers the edge's and the bundled node's collectors on one
// registry, and its /metrics names every metric family once and every
// series once, the contract's families among them (the stall walkthrough
// config, shortened, exercises every contract collector).
func TestDevExportsEverySeriesOnce(t *testing.T) {
	cfg := defaultDevConfig()
	if err := konfig.Load("../../configs/dev-stall-recovery.yaml", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Node.Providers[0].ResponseStallTimeoutMS = 300
	cfg.Node.Liveness.CloseGrace = 100 * time.Millisecond
	api, admin := startDevConfig(t, cfg)
	resp, err := http.Post(api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	types, series := map[string]int{}, map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# TYPE "):
			types[strings.Fields(line)[2]]++
		case line != "" && !strings.HasPrefix(line, "#"):
			series[line[:strings.LastIndexByte(line, ' ')]]++
		}
	}
	for name, n := range types {
		if n != 1 {
			t.Errorf("metric family %s exported %d times", name, n)
		}
	}
	for s, n := range series {
		if n != 1 {
			t.Errorf("series %s exported %d times", s, n)
		}
	}
	for _, want := range []string{"iop_edge_provider_health_evidence_total", "iop_edge_provider_health_transitions_total",
		"iop_edge_liveness_recovery_eligibility_total", "iop_edge_liveness_recovery_results_total",
		"iop_node_response_stalls_total", "iop_node_response_stall_duration_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if types[want] != 1 {
			t.Errorf("/metrics has no family %s", want)
		}
	}
}
