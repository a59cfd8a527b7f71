package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
)

// TestSentinelsNeverLeak is RELIABILITY.md S5: unique sentinels — a client
// key, provider keys in a header and a URL query, the node token, prompt
// text, response text and tool arguments — are planted; requests run at
// debug log level through success, auth failure, unreachable upstream,
// stall and unknown-model paths; no sentinel appears in any log line, the
// metrics exposition, or any client-facing error body.
func TestSentinelsNeverLeak(t *testing.T) {
	const (
		clientKey   = "sk-SENTINEL-CLIENT-KEY"
		badKey      = "sk-SENTINEL-WRONG-KEY"
		providerKey = "SENTINEL-PROVIDER-KEY"
		queryKey    = "SENTINEL-QUERY-KEY"
		prompt      = "SENTINEL-PROMPT-TEXT"
		response    = "SENTINEL-RESPONSE-TEXT"
		toolArg     = "SENTINEL-TOOL-ARG"
	)
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Gateway: func(g *gateway.Config) {
			g.Auth.Keys = []gateway.KeyConfig{{ID: "k", SHA256: gateway.HashToken(clientKey)}}
		}},
		func(c *Cluster) []NodeSpec {
			c.Wall.Tokens = []string{response, " tail"}
			good := c.WallProvider("good", "openai", nodeagent.PathNormalized, "ok", "stall-after-1")
			good.APIKey, good.Headers = providerKey, map[string]string{"X-Provider-Secret": providerKey}
			good.ResponseStallTimeoutMS = 300
			down := nodeagent.ProviderConfig{ID: "down", Adapter: "openai", BaseURL: "http://127.0.0.1:1/v1?key=" + queryKey, APIKey: providerKey, Models: []string{"down"}}
			tun := c.WallProvider("tun", "openai", nodeagent.PathTunnel, "tools")
			return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{good, down, tun},
				Configure: func(n *nodeagent.Config) { n.Token = "token-node-a"; n.Liveness.CloseGrace = 100 * time.Millisecond }}}
		})
	var bodies []string
	do := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			bodies = append(bodies, string(b))
		}
	}
	msg := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}],"tools":[{"type":"function","function":{"name":"f","parameters":{"description":%q}}}]}`, model, stream, prompt, toolArg)
	}
	do(clientKey, msg("ok", false))
	do(clientKey, msg("ok", true))
	do(badKey, msg("ok", false))
	do(clientKey, msg("down", false))
	do(clientKey, msg("stall-after-1", true))
	// An unknown model is echoed to its own client in the 404 (as OpenAI
	// does) but must reach no log line and no metric label.
	do(clientKey, msg("no-such-model-UNKNOWN-MODEL-MARKER", false))
	do(clientKey, msg("tools", true))
	do(clientKey, `{"model":"`+prompt+`","messages":[`)
	resp, err := http.Get(c.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	everything := map[string]string{"logs": logs.String(), "metrics": string(metrics), "error bodies": strings.Join(bodies, "\n")}
	if len(bodies) < 4 || !strings.Contains(logs.String(), "node_response_stall_observation") {
		t.Fatalf("the scenarios did not run as planned: %d error bodies", len(bodies))
	}
	for where, text := range everything {
		for _, s := range []string{"SENTINEL", "token-node-a", "UNKNOWN-MODEL-MARKER"} {
			if where == "error bodies" && s == "UNKNOWN-MODEL-MARKER" {
				continue
			}
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				t.Errorf("%s contains %s: …%s…", where, s, text[max(0, i-80):min(len(text), i+80)])
			}
		}
	}
}

// TestMetricCardinalityIsBounded is S6: thousands of requests with random
// model names, user ids and request ids grow /metrics by a constant.
func TestMetricCardinalityIsBounded(t *testing.T) {
	c := simCluster(t, nil)
	count := func() int {
		n := 0
		for _, f := range c.Metrics(t) {
			n += len(f.GetMetric())
		}
		return n
	}
	streamChat(t, c.URL, "iop-sim") // warm every normal series
	before := count()
	client := &http.Client{}
	for i := range 2000 {
		model := fmt.Sprintf("model-%d-%x", i, rand.Uint64())
		req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","user":"user-`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Request-Id", "req-"+model)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if grown := count() - before; grown > 20 {
		t.Fatalf("/metrics grew by %d series after 2000 random-model requests", grown)
	}
}

// TestLogInjection is S7: a model name or header with a newline and a
// forged JSON record cannot forge a log record.
func TestLogInjection(t *testing.T) {
	logs := &logbuf.Buffer{}
	c := Start(t, Options{Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}
	})
	forged := "x\n{\"level\":\"ERROR\",\"msg\":\"FORGED\"}\n\x1b[31m"
	b, _ := json.Marshal(map[string]any{"model": forged, "messages": []any{map[string]string{"role": "user", "content": forged}}})
	req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("X-Forged", "a\u2028b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	streamChat(t, c.URL, "iop-sim")
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("a log line is not one JSON record: %q", sc.Text())
		}
		if rec["msg"] == "FORGED" {
			t.Fatal("a forged record made it into the log")
		}
	}
}

// TestSlowClients is S9: header tricklers are closed by ReadHeaderTimeout,
// a slow body is cut by the body deadline, and a client that stops reading
// an SSE stream is cut off by the per-write deadline, which also cancels
// the upstream — while a legitimate request completes in under a second.
func TestSlowClients(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Limits.ReadHeaderTimeout, g.Limits.BodyReadTimeout, g.Limits.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond
	}}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{}),
			c.WallProvider("wall", "openai", nodeagent.PathTunnel, "flood")}}}
	})
	addr := strings.TrimPrefix(c.URL, "http://")
	// 50 header tricklers.
	var closed atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	var worst atomic.Int64
	for range 50 {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
			for i := 0; i < 100; i++ {
				if _, err := fmt.Fprintf(conn, "X-Trickle-%d: y\r\n", i); err != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.ReadAll(conn)
			closed.Add(1)
			if d := time.Since(start); int64(d) > worst.Load() {
				worst.Store(int64(d))
			}
		})
	}
	// A legitimate request meanwhile.
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	if r := streamChat(t, c.URL, "iop-sim"); r.done != 1 {
		t.Fatalf("legitimate request %+v", r)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("legitimate request took %v among tricklers", d)
	}
	wg.Wait()
	if closed.Load() != 50 || time.Duration(worst.Load()) > 2500*time.Millisecond {
		t.Fatalf("%d tricklers closed, the last after %v (ReadHeaderTimeout 500ms)", closed.Load(), time.Duration(worst.Load()))
	}
	// A slow body.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	t1 := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != 400 || time.Since(t1) > 2*time.Second {
		t.Fatalf("slow body: %v %v after %v", resp, err, time.Since(t1))
	}
	// A client that stops reading a stream.
	cutsBefore := c.Metric(t, "iop_edge_slow_client_cuts_total", nil)
	cancelsBefore := c.Metric(t, "iop_edge_client_cancelled_total", nil)
	conn, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	body := `{"model":"flood","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	deadline := time.Now().Add(10 * time.Second)
	for len(c.Wall.AttemptsFor("flood")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a := c.Wall.AttemptsFor("flood")
	if len(a) != 1 {
		t.Fatal("the flood never started")
	}
	select {
	case <-a[0].Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream of a non-reading client was never cancelled")
	}
	if !a[0].Cancelled() {
		t.Fatal("the upstream finished instead of being cancelled")
	}
	t.Logf("non-reading client: upstream cancelled after %v, having sent %d KiB", a[0].EndedAt().Sub(a[0].Start), a[0].SentBytes()>>10)
	c.WaitIdle(t)
	// The request's end is counted after its lease is back: wait for it
	// to be counted as either, then require the cut.
	cuts := func() float64 { return c.Metric(t, "iop_edge_slow_client_cuts_total", nil) - cutsBefore }
	cancels := func() float64 { return c.Metric(t, "iop_edge_client_cancelled_total", nil) - cancelsBefore }
	wait.Until(t, func() bool { return cuts()+cancels() >= 1 })
	if d := cuts(); d != 1 {
		t.Fatalf("iop_edge_slow_client_cuts_total +%v, iop_edge_client_cancelled_total +%v, want a cut, not a cancel", d, cancels())
	}
}

// TestNoFetchOfClientURLs is S10: image URLs in requests are never fetched
// by the edge or the node; the URL travels to the provider as data.
func TestNoFetchOfClientURLs(t *testing.T) {
	var fetched atomic.Int32
	bait := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fetched.Add(1) }))
	defer bait.Close()
	c := simCluster(t, nil)
	body := `{"model":"%s","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"` + bait.URL + `/cat.png"}}]}]}`
	for _, model := range []string{"iop-sim", "ok"} {
		resp := post(t, c.URL+"/v1/chat/completions", fmt.Sprintf(body, model))
		readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", model, resp.StatusCode)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Fatalf("the bait URL was fetched %d times", n)
	}
	if a := c.Wall.AttemptsFor("ok"); len(a) != 1 || !bytes.Contains(a[0].Body, []byte(bait.URL)) {
		t.Fatal("the tunnelled request lost the image URL")
	}
}

// TestAdminSurface is S2/S4: every admin route but health, the (static)
// status page and its sign-in needs the admin token when one is
// configured, and none is reachable on the public port.
func TestAdminSurface(t *testing.T) {
	c := simCluster(t, func(g *gateway.Config) { g.Admin.TokenSHA256 = gateway.HashToken("admin-secret") })
	for _, r := range c.Gateway.AdminRoutes() {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", 401}, {"wrong", 401}, {"admin-secret", 200}} {
			req, _ := http.NewRequestWithContext(context.Background(), r.Method, c.AdminURL+r.Path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := tc.want
			switch r.Path {
			case "/healthz", "/readyz", "/status":
				want = 200
			case "/admin/login":
				want = 401 // the token goes in the form body, never a header or URL
			}
			if resp.StatusCode != want {
				t.Fatalf("%s %s with token %q: %d, want %d", r.Method, r.Path, tc.token, resp.StatusCode, want)
			}
		}
		resp, err := http.Get(c.URL + r.Path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if r.Path != "/openapi.yaml" && resp.StatusCode != 404 && resp.StatusCode != 405 {
			t.Fatalf("%s on the public port: %d", r.Path, resp.StatusCode)
		}
	}
}

// TestAuthLimiterUnderAttack: 1,000 bad keys from one address are limited
// (429 after the first 20), while a valid key from the same address keeps
// working throughout.
func TestAuthLimiterUnderAttack(t *testing.T) {
	c := simCluster(t, func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "good", SHA256: gateway.HashToken("sk-good")}}
	})
	get := func(key string) int {
		req, _ := http.NewRequest(http.MethodGet, c.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	throttled := 0
	for i := range 1000 {
		switch get(fmt.Sprintf("sk-bad-%d", i)) {
		case http.StatusTooManyRequests:
			throttled++
		case http.StatusUnauthorized:
		default:
			t.Fatal("a bad key was not refused")
		}
		if i%50 == 0 {
			if code := get("sk-good"); code != http.StatusOK {
				t.Fatalf("the valid key after %d bad attempts: %d", i+1, code)
			}
		}
	}
	if throttled != 1000-20 {
		t.Fatalf("%d of 1,000 bad attempts throttled, want 980", throttled)
	}
}
