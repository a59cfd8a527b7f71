package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/streamcheck"
	"github.com/iopgw/iop/nodeagent"
)

// soakConfig comes from the environment so one test serves make test
// (R20, shortened) and make soak (R20 at 60 s, R21 at 1,000 × 10 min).
type soakConfig struct {
	streams     int
	duration    time.Duration
	faults      bool    // 1 % stalls and 1 % cuts
	disconnects float64 // fraction of streams the client abandons per minute
}

func soakFromEnv(t *testing.T) soakConfig {
	c := soakConfig{streams: 200, duration: 10 * time.Second}
	if v := os.Getenv("IOP_SOAK_STREAMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("IOP_SOAK_STREAMS=%q", v)
		}
		c.streams = n
	}
	if v := os.Getenv("IOP_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("IOP_SOAK_DURATION=%q", v)
		}
		c.duration = d
	}
	c.faults = os.Getenv("IOP_SOAK_FAULTS") == "1"
	if v := os.Getenv("IOP_SOAK_DISCONNECTS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			t.Fatalf("IOP_SOAK_DISCONNECTS=%q", v)
		}
		c.disconnects = f
	}
	return c
}

const soakTokenEvery = 500 * time.Millisecond

// TestSoak is RELIABILITY.md R20, and R21 under make soak: concurrent
// streams through the edge and two nodes (one normalized, one tunnel
// provider) to the wall, one token every 500 ms. Without faults every
// stream completes with exactly the wall's tokens. With faults (1 %
// stalls, 1 % cuts) and client disconnects, every stream still ends —
// success, a typed in-band error or the client's own cancel — and none is
// left open. Afterwards no lease is held and the goroutines are back to
// baseline ±5; the heap's growth over the run is reported (and bounded at
// 1 MiB/min on runs of two minutes or more).
func TestSoak(t *testing.T) {
	cfg := soakFromEnv(t)
	tokens := int(cfg.duration / soakTokenEvery)
	stallMS := int64(300000)
	if cfg.faults {
		stallMS = 2000 // so injected stalls resolve within the run
	}
	c := Start(t, Options{WallDelay: soakTokenEvery}, func(c *Cluster) []NodeSpec {
		c.Wall.Tokens = make([]string, tokens)
		for i := range c.Wall.Tokens {
			c.Wall.Tokens[i] = " t" + strconv.Itoa(i)
		}
		models := []string{"soak", fmt.Sprintf("stall-after-%d", tokens/3), fmt.Sprintf("cut-after-%d", tokens/3)}
		n := c.WallProvider("normalized", "openai", nodeagent.PathNormalized, models...)
		tn := c.WallProvider("tunnel", "openai", nodeagent.PathTunnel, models...)
		n.Capacity, tn.Capacity = cfg.streams, cfg.streams
		n.ResponseStallTimeoutMS, tn.ResponseStallTimeoutMS = stallMS, stallMS
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{n}}, {ID: "node-b", Providers: []nodeagent.ProviderConfig{tn}}}
	})
	want := strings.Join(c.Wall.Tokens, "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.streams, MaxConnsPerHost: 0}}

	c.WaitParked(t)
	runtime.GC()
	baseG, _ := liveGoroutines()
	baseHeap := heapAndStack()

	var mu sync.Mutex
	outcomes := map[string]int{}
	var samples []memSample
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		start := time.Now()
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(max(cfg.duration/20, time.Second)):
				mu.Lock()
				samples = append(samples, memSample{time.Since(start), heapAndStack()})
				mu.Unlock()
			}
		}
	})
	deadline := cfg.duration + 2*time.Duration(stallMS)*time.Millisecond + 30*time.Second
	var wg sync.WaitGroup
	for i := range cfg.streams {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 42))
			model := "soak"
			if cfg.faults {
				switch x := r.Float64(); {
				case x < 0.01:
					model = fmt.Sprintf("stall-after-%d", tokens/3)
				case x < 0.02:
					model = fmt.Sprintf("cut-after-%d", tokens/3)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			leave := time.Duration(-1)
			if r.Float64() < cfg.disconnects*cfg.duration.Minutes() {
				leave = time.Duration(r.Int64N(int64(cfg.duration)))
				time.AfterFunc(leave, cancel)
			}
			o := soakStream(ctx, client, c.URL, model, want)
			if o == "timeout" && leave >= 0 {
				o = "client_cancel"
			}
			mu.Lock()
			outcomes[o]++
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stopSampling)
	sampler.Wait()
	t.Logf("%d streams × %v: %v", cfg.streams, cfg.duration, outcomes)
	for o, n := range outcomes {
		switch {
		case o == "success":
		case o == "client_cancel" && cfg.disconnects > 0:
		case o == "typed_error" && cfg.faults:
		default:
			t.Errorf("%d streams ended as %q", n, o)
		}
	}
	c.WaitIdle(t)
	client.CloseIdleConnections()
	checkGoroutines(t, baseG)
	reportHeap(t, cfg, baseHeap, samples)
}

// soakStream runs one streaming request and classifies its end.
func soakStream(ctx context.Context, client *http.Client, url, model, want string) string {
	body := `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"soak"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "timeout"
		}
		return "transport_error: " + clip(err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil && ctx.Err() != nil:
		return "timeout"
	case err != nil:
		return "read_error: " + clip(err.Error())
	case resp.StatusCode != 200:
		return "status_" + strconv.Itoa(resp.StatusCode)
	}
	if err := streamcheck.Chat(b); err != nil {
		return "invalid_stream: " + clip(err.Error())
	}
	if bytes.Contains(b, []byte(`data: {"error":`)) {
		return "typed_error"
	}
	if got := chatText(b); got != want {
		return fmt.Sprintf("wrong_content (%d of %d bytes)", len(got), len(want))
	}
	return "success"
}

func chatText(b []byte) string {
	var sb strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &c) == nil {
			for _, ch := range c.Choices {
				sb.WriteString(ch.Delta.Content)
			}
		}
	}
	return sb.String()
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

type memSample struct {
	at    time.Duration
	bytes uint64
}

func heapAndStack() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// checkGoroutines waits for the goroutine count to settle within ±5 of
// base. Idle keep-alive connections (the nodes' pools to the wall, the
// wall's and the edge's idle server sides) and the goroutines a node
// keeps for its next providers (at most 64 each, waiting with nothing
// to run) are pools, not leaks, and are not counted — as goleak's
// ignore lists do.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, dump := liveGoroutines()
		if n <= base+5 {
			t.Logf("goroutines: %d after drain (idle keep-alive connections aside), baseline %d", n, base)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d after drain, baseline %d\n%s", n, base, dump)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveGoroutines counts goroutines other than idle keep-alive connections.
func liveGoroutines() (int, string) {
	buf := make([]byte, 8<<20)
	all := string(buf[:runtime.Stack(buf, true)])
	n := 0
	var kept []string
	for _, g := range strings.Split(all, "\n\n") {
		idle := strings.Contains(g, "net/http.(*persistConn).readLoop") || strings.Contains(g, "net/http.(*persistConn).writeLoop") ||
			(strings.Contains(g, "net/http.(*conn).serve") &&
				(strings.Contains(g, "net/http.(*conn).readRequest") || strings.Contains(g, "bufio.(*Reader).Peek"))) ||
			waitsInWorkers(g)
		if !idle {
			n++
			kept = append(kept, g)
		}
	}
	return n, strings.Join(kept, "\n\n")
}

// waitsInWorkers reports whether goroutine g (its stack as runtime.Stack
// prints it) is a syncx.Workers goroutine waiting for a function: its
// first frame outside the runtime is the set's own loop.
func waitsInWorkers(g string) bool {
	for _, line := range strings.Split(g, "\n")[1:] {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
			continue
		}
		return strings.HasPrefix(line, "github.com/iopgw/iop/internal/syncx.(*Workers).run(")
	}
	return false
}

// reportHeap logs the combined (client, edge, nodes, wall: one process)
// heap+stack per open stream at the plateau, and the growth rate after
// warm-up, which must stay ≤ 1 MiB/min on runs of two minutes or more.
func reportHeap(t *testing.T, cfg soakConfig, base uint64, samples []memSample) {
	t.Helper()
	if len(samples) < 4 {
		return
	}
	mid := samples[len(samples)/2]
	perStream := (float64(mid.bytes) - float64(base)) / float64(cfg.streams) / 1024
	var warm []memSample // the plateau: after warm-up, before streams end
	for _, s := range samples {
		if s.at > cfg.duration/5 && s.at < cfg.duration*9/10 {
			warm = append(warm, s)
		}
	}
	slope := slopePerMinute(warm)
	t.Logf("heap+stack: %.0f KiB per open stream (whole process: client, edge, 2 nodes, wall), growth after warm-up %.2f MiB/min", perStream, slope/(1<<20))
	if cfg.duration >= 2*time.Minute && slope > 1<<20 {
		t.Errorf("heap grows %.2f MiB/min after warm-up (limit 1 MiB/min)", slope/(1<<20))
	}
}

// slopePerMinute is the least-squares slope of bytes over time.
func slopePerMinute(s []memSample) float64 {
	var sx, sy, sxx, sxy float64
	for _, p := range s {
		x, y := p.at.Minutes(), float64(p.bytes)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(s))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}
