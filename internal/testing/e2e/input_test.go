package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/oaispec"
	"github.com/iopgw/iop/nodeagent"
)

func simCluster(t *testing.T, configure func(*gateway.Config)) *Cluster {
	return Start(t, Options{Gateway: configure}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", nodeagent.SimConfig{}),
			c.WallProvider("wall-t", "openai", nodeagent.PathTunnel, "ok")}}}
	})
}

// TestInvalidInputIsA400 covers RELIABILITY.md V1, V3-V6: every bad body is
// a 400 in the OpenAI error shape, fast, and never reaches a provider.
func TestInvalidInputIsA400(t *testing.T) {
	c := simCluster(t, nil)
	deep := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	cases := map[string]string{
		"malformed":        `{"model":"iop-sim","messages":[`,
		"stream yes":       `{"model":"iop-sim","stream":"yes","messages":[{"role":"user","content":"hi"}]}`,
		"messages object":  `{"model":"iop-sim","messages":{}}`,
		"missing model":    `{"messages":[{"role":"user","content":"hi"}]}`,
		"model number":     `{"model":1,"messages":[{"role":"user","content":"hi"}]}`,
		"deep nesting":     deep,
		"invalid utf8":     "{\"model\":\"iop-sim\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
		"lone surrogate":   `{"model":"iop-sim","messages":[{"role":"user","content":"\ud800"}]}`,
		"duplicate model":  `{"model":"ok","model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`,
		"duplicate stream": `{"model":"iop-sim","stream":true,"stream":false,"messages":[{"role":"user","content":"hi"}]}`,
		// Keys differing only in case: the edge would read the later, a
		// provider reading keys exactly the first.
		"model in two cases":           `{"model":"ok","MODEL":"iop-sim","messages":[{"role":"user","content":"hi"}]}`,
		"max_tokens in two cases":      `{"model":"ok","max_tokens":100000,"Max_Tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		"stream folded by ſ":           `{"model":"ok","stream":false,"\u017ftream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"anthropic model in two cases": `{"model":"ok","Model":"iop-sim","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		"ollama model in two cases":    `{"model":"ok","MODEL":"iop-sim","messages":[{"role":"user","content":"hi"}]}`,
		"max_tokens 1e999":             `{"model":"iop-sim","max_tokens":1e999,"messages":[{"role":"user","content":"hi"}]}`,
		"max_tokens -1":                `{"model":"iop-sim","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`,
		"n 1e9":                        `{"model":"iop-sim","n":1000000000,"messages":[{"role":"user","content":"hi"}]}`,
		"temperature NaN":              `{"model":"iop-sim","temperature":"NaN","messages":[{"role":"user","content":"hi"}]}`,
		"giant stop":                   `{"model":"iop-sim","stop":["a","b","c","d","e","f"],"messages":[{"role":"user","content":"hi"}]}`,
		"empty body":                   ``,
		"array body":                   `[]`,
		"responses no input":           `{"model":"iop-sim"}`,
	}
	before := len(c.Wall.Attempts())
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			path := "/v1/chat/completions"
			switch {
			case strings.HasPrefix(name, "responses"):
				path = "/v1/responses"
			case strings.HasPrefix(name, "anthropic"):
				path = "/v1/messages"
			case strings.HasPrefix(name, "ollama"):
				path = "/api/chat"
			}
			start := time.Now()
			resp := post(t, c.URL+path, body)
			b := readAll(t, resp)
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
			if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			switch {
			case strings.HasPrefix(name, "ollama"): // Ollama's shape
				var e struct{ Error string }
				if json.Unmarshal([]byte(b), &e) != nil || e.Error == "" {
					t.Fatalf("error body %s", b)
				}
			case strings.HasPrefix(name, "anthropic"): // Anthropic's shape
				var e struct {
					Type  string
					Error struct{ Type, Message string }
				}
				if json.Unmarshal([]byte(b), &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
					t.Fatalf("error body %s", b)
				}
			default:
				if err := oaispec.Validate("ErrorResponse", []byte(b)); err != nil || !strings.Contains(b, `"type":"invalid_request_error"`) {
					t.Fatalf("error body %s: %v", b, err)
				}
			}
		})
	}
	if n := len(c.Wall.Attempts()) - before; n != 0 {
		t.Fatalf("%d upstream attempts for invalid input", n)
	}
}

// TestValidWeirdTextPassesByteIdentical (V4): valid but unusual text
// reaches the provider unchanged on the tunnel path.
func TestValidWeirdTextPassesByteIdentical(t *testing.T) {
	c := simCluster(t, nil)
	body := `{"model":"ok","messages":[{"role":"user","content":"\u202e RTL 👩‍👩‍👧 z̴̡̛a̶l̷g̸o \u0000 \ufeff"}]}`
	resp := post(t, c.URL+"/v1/chat/completions", body)
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	a := c.Wall.AttemptsFor("ok")
	if len(a) != 1 || string(a[0].Body) != body {
		t.Fatalf("upstream saw %q", a[0].Body)
	}
}

func TestLimits(t *testing.T) {
	c := simCluster(t, func(g *gateway.Config) { g.Limits.MaxBodyBytes = 1 << 10 })
	pad := func(n int) string {
		head := `{"model":"iop-sim","messages":[{"role":"user","content":"`
		tail := `"}]}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	resp := post(t, c.URL+"/v1/chat/completions", pad(1<<10))
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("limit-sized body: %d %s", resp.StatusCode, b)
	}
	resp = post(t, c.URL+"/v1/chat/completions", pad(1<<10+1))
	if b := readAll(t, resp); resp.StatusCode != 413 || !strings.Contains(b, `"code":"request_too_large"`) {
		t.Fatalf("limit+1 body: %d %s", resp.StatusCode, b)
	}
	// Header block beyond MaxHeaderBytes (64 KiB).
	req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(pad(200)))
	req.Header.Set("X-Big", strings.Repeat("x", 70<<10))
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b := readAll(t, r); r.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(b, `"code":"request_header_fields_too_large"`) {
		t.Fatalf("huge header block: %d %s", r.StatusCode, b)
	}
}

// TestHeaderAbuse (V7): CR/LF injection and conflicting framing are
// refused by the server; nothing reaches a provider.
func TestHeaderAbuse(t *testing.T) {
	c := simCluster(t, nil)
	addr := strings.TrimPrefix(c.URL, "http://")
	for name, raw := range map[string]string{
		"CL and TE": "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"two CL":    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
		"bare LF":   "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: a\nX-Injected: b\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, raw)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.StatusCode != 400 {
			t.Fatalf("%s: status %d", name, resp.StatusCode)
		}
	}
	if n := len(c.Wall.Attempts()); n != 0 {
		t.Fatalf("%d upstream attempts", n)
	}
}

func TestUnknownRouteAndMethodShapes(t *testing.T) {
	c := simCluster(t, nil)
	resp := post(t, c.URL+"/v1/nope", `{}`)
	if b := readAll(t, resp); resp.StatusCode != 404 || !strings.Contains(b, `"message":"Invalid URL (POST /v1/nope)"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r, _ := http.Get(c.URL + "/v1/chat/completions")
	if b := readAll(t, r); r.StatusCode != 405 || !strings.Contains(b, `"error":{`) {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	r, _ = http.Get(c.URL + "/api/nope")
	if b := readAll(t, r); r.StatusCode != 404 || !strings.HasPrefix(b, `{"error":"`) {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/vars", "/metrics"} {
		r, _ = http.Get(c.URL + p)
		if readAll(t, r); r.StatusCode != 404 {
			t.Fatalf("%s on the public port: %d", p, r.StatusCode)
		}
	}
}

func TestClientAuth(t *testing.T) {
	c := simCluster(t, func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-good")}}
		g.Auth.FailuresPerMinute = 5
	})
	body := `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`
	do := func(path, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, c.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return r.StatusCode, readAll(t, r)
	}
	if code, b := do("/v1/chat/completions", "sk-good"); code != 200 {
		t.Fatalf("good key: %d %s", code, b)
	}
	for _, tc := range []struct{ name, path, key string }{
		{"missing", "/v1/chat/completions", ""},
		{"wrong", "/v1/chat/completions", "sk-bad"},
		{"in query", "/v1/chat/completions?api_key=sk-good", "sk-good"},
	} {
		code, b := do(tc.path, tc.key)
		var e struct{ Error struct{ Code, Type string } }
		_ = json.Unmarshal([]byte(b), &e)
		if code != 401 || e.Error.Code != "invalid_api_key" {
			t.Fatalf("%s: %d %s", tc.name, code, b)
		}
		if strings.Contains(b, "sk-good") || strings.Contains(b, "sk-bad") {
			t.Fatalf("%s: key echoed in %s", tc.name, b)
		}
	}
	if code, _ := do("/api/chat", ""); code != 401 {
		t.Fatalf("ollama route without key: %d", code)
	}
	for range 5 {
		do("/v1/chat/completions", "sk-bad")
	}
	// Failures are limited per address; a valid key from the same
	// address still passes (one misconfigured client behind a shared
	// proxy must not lock out the others).
	if code, b := do("/v1/chat/completions", "sk-bad"); code != 429 {
		t.Fatalf("a bad key after repeated failures: %d %s", code, b)
	}
	for range 1000 {
		do("/v1/models", "sk-bad")
	}
	if code, b := do("/v1/chat/completions", "sk-good"); code != 200 {
		t.Fatalf("a valid key after 1,000 failures from its address: %d %s", code, b)
	}
}
