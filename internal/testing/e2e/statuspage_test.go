package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// TestStatusPageInChromium loads the admin status page in headless
// Chromium (playwright-core), makes a provider stall, and watches the page
// show it unavailable and then recovered.
func TestStatusPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required (Debian package chromium; .ci/run installs it)")
	}
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Providers = []gateway.ProviderPolicy{{ID: "node-a/sim-flaky", Priority: 10}}
		g.Overlay = gateway.OverlayConfig{RecoveryInterval: 300 * time.Millisecond, RecoveryMaxInterval: 600 * time.Millisecond}
	}}, func(c *Cluster) []NodeSpec {
		flaky := Sim("sim-flaky", nodeagent.SimConfig{StallBeforeFirst: true, StallAttempts: 1, UnhealthyAfterStall: 2 * time.Second})
		flaky.ResponseStallTimeoutMS = 500
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{flaky, Sim("sim-steady", nodeagent.SimConfig{})},
			Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = 200 * time.Millisecond }}}
	})
	cmd := exec.Command("node", "statuspage.mjs", c.AdminURL, c.URL)
	cmd.Dir = filepath.Join("..", "..", "..", "conformance", "testdata", "js")
	cmd.Env = append(cmd.Environ(), "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var r struct {
		OK    bool     `json:"ok"`
		Steps []string `json:"steps"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.OK {
		t.Fatalf("status page run: %s (%v)", out, err)
	}
}
