package conformance

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/internal/testing/styled"
	"github.com/iopgw/iop/nodeagent"
)

// styles are upstreams written unlike iop's own fake (internal/testing/wall).
var styles = map[string]styled.Style{
	// A Python server at its most different: spaced JSON with every
	// non-ASCII character escaped and text cut inside surrogate pairs,
	// "data:" with no space, CRLF, keep-alive comments, role and
	// finish_reason on content chunks, no usage in streams, no [DONE].
	"python-crlf": {Python: true, NoDataSpace: true, CRLF: true, Pings: true, NoStreamUsage: true, FinishOnLast: true, NoDone: true},
	// Spaced JSON with usage in streams, an empty finish chunk and [DONE].
	"python-usage": {Python: true, Pings: true},
}

var styledScenarios = []string{"chat-stream:ok", "chat-usage:ok", "chat-json:ok", "chat-stream:error-event", "chat-json:error-event"}

// Documented differences for other upstreams (docs/conformance.md).
var styledDiffs = map[string][]string{
	// An error reported as the first event of a 200 stream is, through
	// iop, the HTTP error it describes (status class, type, code, param),
	// with iop's request id: nothing was committed, so the client gets an
	// error status its SDK handles — and a server error can be retried.
	// (curl counts the in-band error event as a chunk.)
	"auto|chat-stream:error-event":       {"status", "error", "requestID", "chunks"},
	"normalized|chat-stream:error-event": {"status", "error", "requestID", "chunks"},
	"json|chat-stream:error-event":       {"status", "error", "requestID", "chunks"},
	// iop renders the answer on the translated path.
	"normalized|*": {"requestID", "chunks"},
	"json|*":       {"requestID", "chunks"},
}

func styledAllowed(path, scenario, style string) map[string]bool {
	m := map[string]bool{}
	for _, k := range []string{path + "|*", path + "|" + scenario} {
		for _, f := range styledDiffs[k] {
			m[f] = true
		}
	}
	// A non-stream request on the translated path goes upstream as a
	// stream (non_stream: stream, the default): an upstream that reports
	// no usage in streams gives none, where its JSON answer had some.
	// non_stream: json (the "json" target) sends it as the client did.
	if path == "normalized" && scenario == "chat-json:ok" && styles[style].NoStreamUsage {
		m["usage"] = true
	}
	// The Go SDKs decode each event alone, so directly they show a
	// surrogate pair cut across two events as two U+FFFD; the translated
	// path joins it (checked: the text is exactly styled.Answer).
	if (path == "normalized" || path == "json") && styles[style].Python {
		m["text"] = true
	}
	return m
}

// answerIntact checks that a successful answer on the translated path
// carries the upstream's text exactly, whatever the client (the tunnel
// carries the upstream's bytes, so a client sees there what it sees
// directly).
func answerIntact(path string, o outcome) error {
	if (path == "normalized" || path == "json") && o.Terminal == "ok" && o.Status == 200 && o.Text != styled.Answer {
		return fmt.Errorf("text %q, want %q", o.Text, styled.Answer)
	}
	return nil
}

// TestConformanceOtherUpstreams runs the official clients against
// upstreams in other styles, directly and through iop on the default path
// (auto: the tunnel here), the translated path, and the translated path
// with non_stream: json. Bytes on the tunnel are the upstream's; the
// translated answers carry the same text (surrogate pairs joined), the
// same usage or none, and the upstream's errors.
func TestConformanceOtherUpstreams(t *testing.T) {
	needJS(t, "openai")
	clients := []client{jsClient("openai-node v6 (Node 20)", "node", "openai"), openaiGo(), goOpenAI(), curlClient()}
	names := make([]string, 0, len(styles))
	for n := range styles {
		names = append(names, n)
	}
	sort.Strings(names)
	var table []string
	for _, style := range names {
		srv := httptest.NewServer(&styled.Server{Style: styles[style]})
		t.Cleanup(srv.Close)
		targets := []target{{path: "direct", url: srv.URL}, upstreamCluster(t, "auto", srv.URL, "", ""),
			upstreamCluster(t, "normalized", srv.URL, nodeagent.PathNormalized, ""), upstreamCluster(t, "json", srv.URL, nodeagent.PathNormalized, "json")}
		for _, c := range clients {
			for _, sc := range styledScenarios {
				verify := answerIntact
				if c.name == "curl" {
					verify = nil // the curl client records no text
				}
				table = append(table, compareWith(t, c, sc, style, targets, func(path string) map[string]bool { return styledAllowed(path, sc, style) }, verify)...)
			}
		}
	}
	sort.Strings(table)
	t.Logf("other upstreams (client | scenario@style | path | outcome | differences):\n%s", strings.Join(table, "\n"))
}

// TestConformanceThirdPartyServer puts iop in front of an OpenAI-compatible
// mock server from the npm registry (@dwmkerr/mock-llm, pinned in
// testdata/js): role, content and finish_reason in one chunk, no usage, no
// created time. The outcomes through iop equal the direct ones but for the
// documented translated-path differences.
func TestConformanceThirdPartyServer(t *testing.T) {
	main := filepath.Join(jsDir, "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	if !fileExists(main) {
		t.Fatal("mock-llm is not installed: run `npm ci --prefix conformance/testdata/js` (make test does)")
	}
	url := startMockLLM(t, main)
	targets := []target{{path: "direct", url: url}, upstreamCluster(t, "auto", url, "", ""), upstreamCluster(t, "normalized", url, nodeagent.PathNormalized, "")}
	allowed := map[string][]string{"normalized": {"requestID", "chunks"}}
	var table []string
	for _, c := range []client{jsClient("openai-node v6 (Node 20)", "node", "openai"), openaiGo(), curlClient()} {
		for _, sc := range []string{"chat-stream:ok", "chat-json:ok", "chat-usage:ok"} {
			table = append(table, compareWith(t, c, sc, "mock-llm", targets, func(path string) map[string]bool {
				m := map[string]bool{}
				for _, f := range allowed[path] {
					m[f] = true
				}
				return m
			}, nil)...)
		}
	}
	t.Logf("third-party server (client | scenario | path | outcome | differences):\n%s", strings.Join(table, "\n"))
}

// upstreamCluster is iop with one OpenAI-compatible provider at url.
func upstreamCluster(t *testing.T, label, url, path, nonStream string) target {
	c := e2e.Start(t, e2e.Options{}, func(c *e2e.Cluster) []e2e.NodeSpec {
		p := nodeagent.ProviderConfig{ID: "up", Adapter: "openai", Path: path, BaseURL: url + "/v1", NonStream: nonStream, Capacity: 64,
			Models: []string{"ok", "error-event"}}
		return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{p}}}
	})
	return target{path: label, url: c.URL}
}

// compareWith runs one client/scenario on every target and checks the
// differences from the first (direct) against allowed(path); verify, if
// set, checks each outcome on its own. style names the upstream in the
// table ("" for the wall).
func compareWith(t *testing.T, c client, scenario, style string, targets []target, allowed func(path string) map[string]bool,
	verify func(path string, o outcome) error) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	label := scenario
	if style != "" {
		label += "@" + style
	}
	var rows []string
	var base outcome
	for i, tg := range targets {
		o, err := c.run(ctx, tg.url, scenario)
		if err != nil {
			t.Fatalf("%s %s via %s: %v", c.name, label, tg.path, err)
		}
		if kind, model := split(scenario); kind == "chat-cancel" && tg.wall != nil {
			o.UpstreamCancel = upstreamSawCancel(tg.wall, model)
		}
		if verify != nil {
			if err := verify(tg.path, o); err != nil {
				t.Errorf("%s %s via %s: %v", c.name, label, tg.path, err)
			}
		}
		if i == 0 {
			base = o
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | — |", c.name, label, tg.path, summary(o)))
			continue
		}
		diffs := diffFields(base, o)
		ok := allowed(tg.path)
		for _, d := range diffs {
			if !ok[d] {
				t.Errorf("%s %s via %s: undocumented difference in %s\n direct %+v %+v\n   %s %+v %+v", c.name, label, tg.path, d, base, base.Error, tg.path, o, o.Error)
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", c.name, label, tg.path, summary(o), strings.Join(diffs, ", ")))
	}
	return rows
}

// startMockLLM runs the npm mock server on a free loopback port.
func startMockLLM(t *testing.T, main string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", main)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port), "HOST=127.0.0.1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "server running") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("mock-llm exited before it was ready")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mock-llm did not start within 20 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// TestThirdPartyUsageIsCharged (issue 31, finding 1): an upstream that
// reports no usage at all (mock-llm) is still charged, with an estimate of
// what was delivered, on the tunnelled and the translated path, streamed
// or not; the client's bytes are the upstream's.
func TestThirdPartyUsageIsCharged(t *testing.T) {
	main := filepath.Join(jsDir, "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	if !fileExists(main) {
		t.Fatal("mock-llm is not installed: run `npm ci --prefix conformance/testdata/js` (make test does)")
	}
	url := startMockLLM(t, main)
	for _, path := range []string{"", nodeagent.PathNormalized} {
		c := e2e.Start(t, e2e.Options{Gateway: func(g *gateway.Config) {
			g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a")}}
		}}, func(c *e2e.Cluster) []e2e.NodeSpec {
			p := nodeagent.ProviderConfig{ID: "up", Adapter: "openai", Path: path, BaseURL: url + "/v1", Capacity: 8, Models: []string{"ok"}}
			return []e2e.NodeSpec{{ID: "node-1", Providers: []nodeagent.ProviderConfig{p}}}
		})
		for _, stream := range []bool{false, true} {
			before := c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "source": "estimated", "kind": "completion"})
			body := fmt.Sprintf(`{"model":"ok","stream":%v,"messages":[{"role":"user","content":"Tell me something."}]}`, stream)
			req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer sk-a")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || strings.Contains(string(b), `"usage":{`) {
				t.Fatalf("path %q stream %v: %d %s", path, stream, resp.StatusCode, b)
			}
			charged := c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a", "source": "estimated", "kind": "completion"}) - before
			if charged <= 0 {
				t.Fatalf("path %q stream %v: nothing charged for %s", path, stream, b)
			}
			t.Logf("mock-llm, path %q, stream %v: %v completion tokens estimated for %d bytes of answer", cmp.Or(path, "auto"), stream, charged, len(b))
		}
	}
}
