package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// TestMetricsPassPromtool runs `promtool check metrics` on both exposition
// endpoints after traffic that exercises every contract collector.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is required (Debian package prometheus; .ci/run installs it)")
	}
	c := flakyCluster(t, flaky{id: "flaky", stallMS: 200, closeGrace: 100 * time.Millisecond, unhealthyFor: 300 * time.Millisecond,
		recovery: 100 * time.Millisecond})
	if r := streamChat(t, c.URL, "iop-sim"); r.done != 1 {
		t.Fatalf("%+v", r)
	}
	resp, err := http.Get(c.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	edge, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var node bytes.Buffer
	fams, err := c.Nodes["node-a"].Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	enc := expfmt.NewEncoder(&node, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		_ = enc.Encode(f)
	}
	for name, text := range map[string][]byte{"edge": edge, "node": node.Bytes()} {
		for _, want := range map[string][]string{
			"edge": {"iop_edge_liveness_recovery_eligibility_total", "iop_edge_provider_health_evidence_total", "iop_edge_provider_health_transitions_total", "iop_edge_liveness_recovery_results_total"},
			"node": {"iop_node_response_stalls_total", "iop_node_response_stall_duration_seconds_bucket"},
		}[name] {
			if !bytes.Contains(text, []byte(want)) {
				t.Fatalf("%s exposition lacks %s", name, want)
			}
		}
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(text)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("promtool check metrics (%s): %v\n%s", name, err, out)
		}
	}
}
