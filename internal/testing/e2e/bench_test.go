package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/tracing"
	"github.com/iopgw/iop/nodeagent"
)

// fastUpstream answers chat completions instantly (JSON or 32-chunk SSE).
func fastUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !bytes.Contains(b, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"xxxxxxxxxxxxxxxx","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 34 {
			delta, fin := `{"content":"xxxxxxxxxxxxxxxx"}`, "null"
			if i == 33 {
				delta, fin = `{}`, `"stop"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]}\n\n", delta, fin)
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
}

func benchCluster(b *testing.B) *Cluster {
	up := httptest.NewServer(fastUpstream())
	b.Cleanup(up.Close)
	// TCP unless IOP_TEST_NODE_LINK=in-process.
	return Start(b, Options{TCPNodeLink: os.Getenv("IOP_TEST_NODE_LINK") != LinkInProcess}, func(c *Cluster) []NodeSpec {
		n := nodeagent.ProviderConfig{ID: "n", Adapter: "openai", Path: nodeagent.PathNormalized, BaseURL: up.URL + "/v1", Models: []string{"bench-n"}, Capacity: 100000}
		t := nodeagent.ProviderConfig{ID: "t", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: up.URL + "/v1", Models: []string{"bench-t"}, Capacity: 100000}
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{n, t}}}
	})
}

// BenchmarkGateway measures requests through an in-process edge and node
// (TCP node link, or the in-process channel with
// IOP_TEST_NODE_LINK=in-process) to an instant upstream: `go test -bench Gateway
// -cpuprofile` profiles the hot path. make bench measures processes.
func BenchmarkGateway(b *testing.B) {
	c := benchCluster(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, tc := range []struct{ name, body string }{
		{"tunnel-json", `{"model":"bench-t","messages":[{"role":"user","content":"hi"}]}`},
		{"normalized-json", `{"model":"bench-n","messages":[{"role":"user","content":"hi"}]}`},
		{"tunnel-stream", `{"model":"bench-t","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"normalized-stream", `{"model":"bench-n","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"tunnel-json-1mib", `{"model":"bench-t","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(c.URL+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
					if err != nil {
						b.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || (strings.Contains(tc.body, "stream") && !bytes.Contains(body, []byte("[DONE]"))) {
						b.Fatalf("%d %s", resp.StatusCode, body)
					}
				}
			})
		})
	}
}

// BenchmarkTenancyOverhead measures what key limits and tracing cost per
// request (tunnel JSON through edge and node to an instant upstream):
// `go test -run '^$' -bench TenancyOverhead ./internal/testing/e2e`.
func BenchmarkTenancyOverhead(b *testing.B) {
	discard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(discard.Close)
	up := httptest.NewServer(fastUpstream())
	b.Cleanup(up.Close)
	for _, tc := range []struct {
		name string
		gw   func(*gateway.Config)
		key  string
	}{
		{"off", nil, ""},
		{"key-limits", func(g *gateway.Config) {
			g.Auth.Keys = []gateway.KeyConfig{{ID: "k", SHA256: gateway.HashToken("sk-k"),
				Limits: gateway.KeyLimits{RequestsPerMinute: 1 << 30, TokensPerMinute: 1 << 40, TokensPerDay: 1 << 50}}}
		}, "sk-k"},
		{"tracing", func(g *gateway.Config) { g.Tracing = tracing.Config{Enabled: true, Endpoint: discard.URL} }, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := Start(b, Options{TCPNodeLink: true, Gateway: tc.gw}, func(*Cluster) []NodeSpec {
				t := nodeagent.ProviderConfig{ID: "t", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: up.URL + "/v1", Models: []string{"bench-t"}, Capacity: 100000}
				return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{t}}}
			})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/chat/completions",
						strings.NewReader(`{"model":"bench-t","messages":[{"role":"user","content":"hi"}]}`))
					if tc.key != "" {
						req.Header.Set("Authorization", "Bearer "+tc.key)
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
			})
		})
	}
}

// holdingUpstream answers a stream request with its head and one chunk,
// then holds it open until release is closed.
func holdingUpstream(release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
}

// holdStreams opens n streams to url and waits until each delivered its
// first chunk; the streams stay open until the returned func closes them.
func holdStreams(b testing.TB, url, model string, n int) func() {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}}
	var bodies []io.Closer
	for range n {
		resp, err := client.Post(url+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil || resp.StatusCode != 200 {
			b.Fatalf("held stream: %d %v", resp.StatusCode, err)
		}
		bodies = append(bodies, resp.Body)
	}
	return func() {
		for _, c := range bodies {
			c.Close()
		}
		client.CloseIdleConnections()
	}
}

// footprint is the process's goroutines and heap+stack bytes in use.
func footprint() (goroutines int, bytes uint64) {
	runtime.GC()
	runtime.GC() // twice: pooled buffers survive one cycle
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapInuse + m.StackInuse
}

// BenchmarkOpenStreams measures what an open, idle stream costs the
// edge and node (tunnel path, in process), on the network link (TCP) and
// on the in-process channel: goroutines and KiB per stream beyond what
// the same streams cost held directly against the upstream (client and
// upstream sides, which are in this process too).
func BenchmarkOpenStreams(b *testing.B) {
	for _, link := range []struct {
		name string
		opts Options
	}{{"tcp", Options{TCPNodeLink: true}}, {"in-process", Options{Link: LinkInProcess}}} {
		b.Run(link.name, func(b *testing.B) { benchOpenStreams(b, link.opts) })
	}
}

// holdingCluster is a cluster whose node serves the model "hold" from
// an upstream that holds its streams open (holdingUpstream) until the
// test ends; it returns the upstream's URL too.
func holdingCluster(tb testing.TB, opts Options) (*Cluster, string) {
	release := make(chan struct{})
	up := httptest.NewServer(holdingUpstream(release))
	tb.Cleanup(up.Close)
	tb.Cleanup(func() { close(release) })
	c := Start(tb, opts, func(*Cluster) []NodeSpec {
		t := nodeagent.ProviderConfig{ID: "t", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: up.URL + "/v1", Models: []string{"hold"}, Capacity: 100000}
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{t}}}
	})
	return c, up.URL
}

func benchOpenStreams(b *testing.B, opts Options) {
	const n = 1000
	c, upURL := holdingCluster(b, opts)
	measure := func(url, model string) (float64, float64) {
		g0, m0 := footprint()
		closeAll := holdStreams(b, url, model, n)
		g1, m1 := footprint()
		closeAll()
		return float64(g1-g0) / n, (float64(m1) - float64(m0)) / 1024 / n
	}
	for b.Loop() {
		dg, dm := measure(upURL, "hold")
		ig, im := measure(c.URL, "hold")
		b.ReportMetric(ig-dg, "goroutines/stream")
		b.ReportMetric(im-dm, "KiB/stream")
	}
}
