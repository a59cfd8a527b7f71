package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/nodeagent"
)

// Issue 31: a tenant who does not play fair. Each test is one finding's
// attack as it was written; the unit tests of the gateway package cover
// the reload and admin findings.

func teamKey(limits gateway.KeyLimits, models ...string) []gateway.KeyConfig {
	return []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: limits, Models: models}}
}

func simNode(c *Cluster) []NodeSpec {
	return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{TokenLatency: time.Millisecond})}}}
}

// TestRevokedKeyIsRefusedAfterItsBody (finding 3): the headers are
// authenticated, the key is removed by a reload while the body is still
// coming (Expect: 100-continue shows the handler is reading it), and
// the request is refused when its body is complete — never served.
func TestRevokedKeyIsRefusedAfterItsBody(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) { g.Auth.Keys = teamKey(gateway.KeyLimits{}) }}, simNode)
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-a\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	_, _ = r.ReadString('\n') // the blank line after it
	cfg := c.Gateway.Config()
	cfg.Auth.Keys = []gateway.KeyConfig{{ID: "team-b", SHA256: gateway.HashToken("sk-b")}}
	if err := c.Gateway.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, body)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(b, "invalid_api_key") {
		t.Fatalf("a key removed before admission got %d %s", resp.StatusCode, b)
	}
}

// TestAllowlistFollowsFallbacks (finding 4): a key allowed only "cheap",
// whose cheap fails with 503, is not answered by the fallback iop-sim it
// may not use; the access log says the fallback was skipped.
func TestAllowlistFollowsFallbacks(t *testing.T) {
	lb := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(lb, nil)), Gateway: func(g *gateway.Config) {
		g.Auth.Keys = teamKey(gateway.KeyLimits{}, "cheap")
		g.Models = []gateway.ModelConfig{{Name: "cheap", Fallbacks: []string{"iop-sim"}}}
	}}, func(c *Cluster) []NodeSpec {
		w := c.WallProvider("w", "openai", nodeagent.PathTunnel, "cheap")
		w.Models = []string{"cheap"}
		c.Wall.Fault = "503-persist"
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{w, Sim("sim", nodeagent.SimConfig{})}}}
	})
	req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(`{"model":"cheap","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := readAll(t, resp)
	if resp.StatusCode == 200 || strings.Contains(b, "iop-sim") {
		t.Fatalf("the fallback the key may not use answered: %d %s", resp.StatusCode, b)
	}
	if !strings.Contains(lb.String(), `"fallbacks_not_allowed":1`) {
		t.Fatalf("the access log does not say a fallback was skipped:\n%s", lb.String())
	}
}

// burst sends n parallel requests as team-a and returns how many were
// answered 200.
func burst(t *testing.T, urls []string, n int, body string) int {
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, urls[i%len(urls)]+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer sk-a")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			readAll(t, resp)
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == 200 {
				ok++
			}
		})
	}
	wg.Wait()
	return ok
}

// usedTokens is what team-a was charged, over every edge.
func usedTokens(t *testing.T, cs []*Cluster) float64 {
	sum := 0.0
	for _, c := range cs {
		sum += c.Metric(t, "iop_edge_key_tokens_total", map[string]string{"key_id": "team-a"})
	}
	return sum
}

// TestBurstsHoldBudgets (finding 5): 30 parallel requests against a daily
// budget of 20 and against 100 tokens per minute, on one edge and on three
// edges sharing Redis: what is charged overshoots the limit by at most one
// request's use (one answer of the sim to "hi" is 13 tokens).
func TestBurstsHoldBudgets(t *testing.T) {
	const oneRequest = 13
	body := `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`
	withMax := `{"model":"iop-sim","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	redisAddr := startRedis(t)
	for _, tt := range []struct {
		name   string
		limits gateway.KeyLimits
		limit  float64
		edges  int
		body   string
	}{
		{"day budget", gateway.KeyLimits{TokensPerDay: 20}, 20, 1, body},
		{"day budget, max_tokens", gateway.KeyLimits{TokensPerDay: 60}, 60, 1, withMax},
		{"tokens per minute", gateway.KeyLimits{TokensPerMinute: 100}, 100, 1, withMax},
		{"day budget, shared", gateway.KeyLimits{TokensPerDay: 20}, 20, 3, body},
		{"tokens per minute, shared", gateway.KeyLimits{TokensPerMinute: 100}, 100, 3, withMax},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cs []*Cluster
			var urls []string
			for range tt.edges {
				c := Start(t, Options{Gateway: func(g *gateway.Config) {
					g.Auth.Keys = teamKey(tt.limits)
					if tt.edges > 1 {
						g.Auth.LimitsStore = gateway.LimitStoreConfig{Redis: redisAddr, Timeout: time.Second}
					}
				}}, simNode)
				cs, urls = append(cs, c), append(urls, c.URL)
			}
			if tt.edges > 1 {
				flushRedis(t, redisAddr)
			}
			ok := burst(t, urls, 30, tt.body)
			for _, c := range cs {
				c.WaitIdle(t)
			}
			used := usedTokens(t, cs)
			if ok == 0 || used > tt.limit+oneRequest {
				t.Fatalf("30 parallel: %d answered, %v tokens charged against a limit of %v", ok, used, tt.limit)
			}
			t.Logf("30 parallel: %d answered, %v tokens charged, limit %v", ok, used, tt.limit)
		})
	}
}

// TestReloadKeepsUsage (finding 6): a key over its day budget, removed by
// a reload and put back, is still over it; the usage file keeps today's
// count (not zeros).
func TestReloadKeepsUsage(t *testing.T) {
	usage := t.TempDir() + "/usage.json"
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = teamKey(gateway.KeyLimits{TokensPerDay: 20})
		g.Auth.UsageFile = usage
	}}, simNode)
	for range 3 {
		readAll(t, chatAs(t, c.URL, "sk-a", false))
	}
	if resp := chatAs(t, c.URL, "sk-a", false); readAll(t, resp) != "" && resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("over budget: %d", resp.StatusCode)
	}
	before := adminKeys(t, c)["team-a"].Today
	cfg := c.Gateway.Config()
	keys := cfg.Auth.Keys
	cfg.Auth.Keys = []gateway.KeyConfig{{ID: "other", SHA256: gateway.HashToken("sk-other")}}
	if err := c.Gateway.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Keys = keys
	if err := c.Gateway.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	resp := chatAs(t, c.URL, "sk-a", false)
	readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || adminKeys(t, c)["team-a"].Today != before {
		t.Fatalf("after the key came back: %d, today %d (before %d)", resp.StatusCode, adminKeys(t, c)["team-a"].Today, before)
	}
	c.StopEdge()
	b, err := readFile(usage)
	if err != nil || !bytes.Contains(b, []byte(fmt.Sprintf(`"tokens": %d`, before))) {
		t.Fatalf("usage file: %v\n%s", err, b)
	}
}

func flushRedis(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
