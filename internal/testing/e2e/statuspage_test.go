package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStatusPageInChromium loads the admin status page in headless
// Chromium (playwright-core), makes a provider stall, and watches the page
// show it unavailable and then recovered.
func TestStatusPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required (Debian package chromium; .ci/run installs it)")
	}
	c := flakyCluster(t, flaky{id: "sim-flaky", stallMS: 500, closeGrace: 200 * time.Millisecond, unhealthyFor: 2 * time.Second,
		recovery: 300 * time.Millisecond})
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
