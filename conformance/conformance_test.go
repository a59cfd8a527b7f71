package conformance

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wall"
	"github.com/iopgw/iop/nodeagent"
)

var openaiScenarios = []string{
	"chat-json:ok", "chat-stream:ok", "chat-stream:ping", "chat-usage:ok", "chat-stream:tools",
	"chat-stream:midstream-error", "chat-stream:truncate-clean", "chat-stream:truncate-abort", "chat-cancel:slow",
	"chat-json:status-400", "chat-json:status-401", "chat-json:status-404", "chat-json:429-retry-after",
	"chat-json:status-500", "chat-json:503-persist",
	"responses-stream:ok", "responses-stream:fail", "responses-stream:error-event", "responses-stream:truncate-clean",
}

var ollamaScenarios = []string{
	"chat-stream:ok", "chat-json:ok", "generate-stream:ok", "tags:ok", "ps:ok", "version:ok", "show:ok",
	"chat-stream:missing", "chat-stream:midstream-error", "chat-stream:truncate-clean",
}

// Documented differences (docs/conformance.md). A difference in any other
// field fails the test.
var expectedDiffs = map[string][]string{
	// Tunnel: a truncated upstream stream gets a typed terminal instead of
	// a clean-looking or abrupt end (RELIABILITY.md R8).
	// The JavaScript SDKs report an in-band error with no HTTP status and
	// the response's request id.
	"tunnel|chat-stream:truncate-clean":      {"terminal", "error", "chunks", "status"},
	"tunnel|chat-stream:truncate-abort":      {"terminal", "error", "chunks", "status", "requestID"},
	"tunnel|responses-stream:truncate-clean": {"terminal", "error", "chunks", "status"},
	"native|chat-stream:truncate-clean":      {"error", "chunks"},
	"native|ollama-chat:truncate-clean":      {"chunks"},

	// Auto (the default): the wall serves Chat natively, so chat runs on
	// the tunnel; it does not declare the Responses API, so Responses
	// requests are translated to Chat (the normalized path).
	"auto|chat-stream:truncate-clean":      {"terminal", "error", "chunks", "status"},
	"auto|chat-stream:truncate-abort":      {"terminal", "error", "chunks", "status", "requestID"},
	"auto|responses-stream:fail":           {"terminal", "chunks", "usage", "text", "requestID"},
	"auto|responses-stream:error-event":    {"terminal", "chunks", "usage", "text", "error", "status", "requestID"},
	"auto|responses-stream:truncate-clean": {"terminal", "chunks", "usage", "text", "error", "status", "requestID"},
	"auto|responses-stream:ok":             {"chunks", "requestID"},

	// Normalized: iop renders the response itself.
	"normalized|*":                               {"requestID"},
	"normalized|chat-stream:midstream-error":     {"error"},
	"normalized|chat-stream:truncate-clean":      {"terminal", "error", "chunks", "status"},
	"normalized|chat-stream:truncate-abort":      {"terminal", "error", "chunks", "status"},
	"normalized|chat-stream:tools":               {"chunks"},
	"normalized|responses-stream:fail":           {"terminal", "chunks", "usage", "text"},
	"normalized|responses-stream:error-event":    {"terminal", "chunks", "usage", "text", "error", "status"},
	"normalized|responses-stream:truncate-clean": {"terminal", "chunks", "usage", "text", "error", "status"},
	"normalized|responses-stream:ok":             {"chunks"},
	"normalized|chat-stream:ping":                {"chunks"},
	// The wall ends its Ollama and its chat truncations at different
	// points; through the normalized path the chat one is what runs.
	"ollama-normalized|chat-stream:midstream-error": {"error"},
	"ollama-normalized|chat-stream:truncate-clean":  {"error", "chunks", "text"},
	"ollama-normalized|ollama-chat:truncate-clean":  {"chunks"},
}

func allowed(path, scenario string) map[string]bool {
	m := map[string]bool{}
	for _, k := range []string{path + "|*", path + "|" + scenario} {
		for _, f := range expectedDiffs[k] {
			m[f] = true
		}
	}
	return m
}

func diffFields(a, b outcome) []string {
	var out []string
	if a.Status != b.Status {
		out = append(out, "status")
	}
	if !reflect.DeepEqual(a.Error, b.Error) {
		out = append(out, "error")
	}
	if !reflect.DeepEqual(a.RequestID, b.RequestID) {
		out = append(out, "requestID")
	}
	if a.Chunks != b.Chunks {
		out = append(out, "chunks")
	}
	if a.Text != b.Text {
		out = append(out, "text")
	}
	if a.Usage != b.Usage {
		out = append(out, "usage")
	}
	if a.Terminal != b.Terminal {
		out = append(out, "terminal")
	}
	if a.UpstreamCancel != b.UpstreamCancel {
		out = append(out, "upstreamCancel")
	}
	return out
}

type target struct {
	path string
	url  string
	wall *wall.Wall
}

func models(scenarios []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range scenarios {
		if _, m := split(s); !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

func directWall(t *testing.T, ms []string) target {
	w := wall.New()
	w.TokenDelay, w.Models = 2*time.Millisecond, ms
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return target{path: "direct", url: srv.URL, wall: w}
}

func cluster(t *testing.T, path, adapter, providerPath string, ms []string) target {
	// The cluster's warnings and errors (a session lost, an ejection) are
	// shown when the suite fails, so a difference can be told from a
	// cluster that lost its node under load.
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() && logs.String() != "" {
			t.Logf("%s cluster's warnings and errors:\n%s", path, logs.String())
		}
	})
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := e2e.Start(t, e2e.Options{Log: log}, func(c *e2e.Cluster) []e2e.NodeSpec {
		c.Wall.Models = ms
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{c.WallProvider("p", adapter, providerPath, ms...)}}}
	})
	return target{path: path, url: c.URL, wall: c.Wall}
}

func TestConformance(t *testing.T) {
	needJS(t, "openai7")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required for the conformance suite")
	}
	oms := models(openaiScenarios)
	openaiTargets := []target{directWall(t, oms), cluster(t, "auto", "openai", "", oms), cluster(t, "tunnel", "openai", nodeagent.PathTunnel, oms),
		cluster(t, "normalized", "openai", nodeagent.PathNormalized, oms)}
	// "missing" is served by nobody: the direct wall and iop both answer 404.
	var olms []string
	for _, m := range models(ollamaScenarios) {
		if m != "missing" {
			olms = append(olms, m)
		}
	}
	ollamaTargets := []target{directWall(t, olms), cluster(t, "native", "ollama", "", olms), cluster(t, "ollama-normalized", "openai", nodeagent.PathNormalized, olms)}

	v7 := jsClient("openai-node v7 (Node 22)", node22(), "openai7")
	openaiClients := []client{jsClient("openai-node v6 (Node 20)", "node", "openai"), v7, openaiGo(), goOpenAI(), curlClient()}
	var table []string
	for _, c := range openaiClients {
		for _, sc := range openaiScenarios {
			if kind, _ := split(sc); kind == "responses-stream" && c.name == "go-openai" {
				continue
			}
			if kind, _ := split(sc); kind == "chat-cancel" && c.name == "curl" {
				continue
			}
			table = append(table, compare(t, c, sc, openaiTargets)...)
		}
	}
	oj := jsClient("ollama-js", "node", "ollama")
	for _, sc := range ollamaScenarios {
		table = append(table, compare(t, oj, sc, ollamaTargets)...)
	}
	for _, sc := range []string{"ollama-chat:ok", "ollama-chat:truncate-clean"} {
		table = append(table, compare(t, curlClient(), sc, ollamaTargets)...)
	}
	sort.Strings(table)
	t.Logf("conformance table (client | scenario | path | outcome | differences):\n%s", strings.Join(table, "\n"))
}

// compare runs one client/scenario on every target and checks the
// differences against the documented ones.
func compare(t *testing.T, c client, scenario string, targets []target) []string {
	t.Helper()
	return compareWith(t, c, scenario, "", targets, func(path string) map[string]bool { return allowed(path, scenario) }, nil)
}

func upstreamSawCancel(w *wall.Wall, model string) bool {
	as := w.AttemptsFor(model)
	if len(as) == 0 {
		return false
	}
	a := as[len(as)-1]
	select {
	case <-a.Done():
	case <-time.After(3 * time.Second):
		return false
	}
	return a.Cancelled()
}

func summary(o outcome) string {
	s := fmt.Sprintf("%d %s", o.Status, o.Terminal)
	if o.Error != nil {
		s += fmt.Sprintf(" %s", o.Error.Class)
		if o.Error.Code != nil {
			s += fmt.Sprintf("(%v)", o.Error.Code)
		}
	}
	return s + fmt.Sprintf(", %d chunks", o.Chunks)
}
