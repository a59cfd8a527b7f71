package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDashboardQueriesKnownMetrics: the dashboard parses, and every metric
// it queries is one iop exports (docs/metrics.md), so a renamed metric
// breaks this test rather than a panel.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	b, err := os.ReadFile("iop.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`iop_[a-z_]+`)
	seen := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(m, "_bucket")
				if !strings.Contains(string(doc), "`"+base+"`") {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not list", p.Title, m)
				}
				seen[base] = true
			}
		}
	}
	for _, contract := range []string{"iop_node_response_stalls_total", "iop_node_response_stall_duration_seconds", "iop_edge_provider_health_evidence_total",
		"iop_edge_provider_health_transitions_total", "iop_edge_liveness_recovery_eligibility_total", "iop_edge_liveness_recovery_results_total"} {
		if !seen[contract] {
			t.Errorf("the dashboard has no panel for %s", contract)
		}
	}
}
