package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// corsPage is a page whose script calls the API on another origin the way
// the official SDK does in a browser (bearer key, JSON, x-stainless-*).
const corsPage = `<!doctype html><div id="result"></div><script>
fetch(%q + "/v1/chat/completions", {method: "POST", headers: {"Authorization": "Bearer sk-browser",
  "Content-Type": "application/json", "x-stainless-os": "Linux"},
  body: JSON.stringify({model: "iop-sim", messages: [{role: "user", content: "hi"}]})})
.then((r) => r.json().then((j) => { document.getElementById("result").textContent =
  "ok " + r.status + " " + (r.headers.get("x-request-id") ? "request-id" : "no-request-id") + " " + j.choices[0].message.content; }))
.catch((e) => { document.getElementById("result").textContent = "blocked " + e; });
</script>`

// TestCORSInChromium: a page on an allowed origin calls iop from headless
// Chromium (preflight, then the request with its key) and reads the
// answer and the exposed X-Request-Id; a page on another origin is
// blocked by the browser.
func TestCORSInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required (Debian package chromium; .ci/run installs it)")
	}
	var api atomic.Pointer[string] // known once the cluster runs
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, corsPage, *api.Load())
	}))
	defer page.Close()
	other := httptest.NewServer(page.Config.Handler)
	defer other.Close()
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "browser", SHA256: gateway.HashToken("sk-browser")}}
		g.CORS.AllowedOrigins = []string{page.URL}
	}, Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}}, nil)
	api.Store(&c.URL)
	run := func(url string) string {
		cmd := exec.Command("node", "cors.mjs", url)
		cmd.Dir = filepath.Join("..", "..", "..", "conformance", "testdata", "js")
		cmd.Env = append(cmd.Environ(), "CHROMIUM="+chromium)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var r struct{ Result string }
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		return r.Result
	}
	if got := run(page.URL); !strings.HasPrefix(got, "ok 200 request-id You said: hi.") {
		t.Fatalf("allowed origin: %q", got)
	}
	if got := run(other.URL); !strings.HasPrefix(got, "blocked") {
		t.Fatalf("another origin: %q", got)
	}
}
