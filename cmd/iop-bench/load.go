package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// target is a system under test as the load client sees it.
type target struct {
	url     string            // base URL (…/v1 is appended)
	headers map[string]string // extra request headers (the peer gateway's routing)
	model   string
}

// loadSpec is one load run.
type loadSpec struct {
	stream      bool
	concurrency int
	requests    int           // total requests (closed loop); 0 = run for duration
	duration    time.Duration // closed or open loop
	rate        float64       // open loop: requests per second (0 = closed loop)
	chunks      int           // content chunks a complete stream must carry
	padBytes    int           // the user message's size (0: "hello")
}

// loadResult is what a run measured.
type loadResult struct {
	requests, errors, truncated int
	chunks                      int64
	latency, ttfb, ttft, gaps   []time.Duration
	elapsed                     time.Duration
}

func newClient(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conc * 2, MaxIdleConnsPerHost: conc * 2, MaxConnsPerHost: 0,
		DisableCompression: true, IdleConnTimeout: time.Minute}}
}

func body(model string, stream bool, pad int) []byte {
	content := "hello"
	if pad > 0 {
		content = strings.Repeat("lorem ipsum ", pad/12+1)[:pad]
	}
	if stream {
		return []byte(`{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + content + `"}]}`)
	}
	return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]}`)
}

// one runs one request and records it.
type sample struct {
	latency, ttfb, ttft time.Duration
	gaps                []time.Duration
	chunks              int
	err, truncated      bool
}

func do(ctx context.Context, c *http.Client, t target, spec loadSpec) sample {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(body(t.model, spec.stream, spec.padBytes)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return sample{err: true}
	}
	defer resp.Body.Close()
	s := sample{ttfb: time.Since(start)}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return sample{err: true}
	}
	if !spec.stream {
		b, err := io.ReadAll(resp.Body)
		s.latency = time.Since(start)
		s.err = err != nil || !bytes.Contains(b, []byte(`"total_tokens"`))
		return s
	}
	return readStream(resp.Body, start, s, spec.chunks)
}

// readStream validates a chat stream: every content chunk, a usage chunk
// and [DONE]; anything less is a truncated stream.
func readStream(r io.Reader, start time.Time, s sample, want int) sample {
	br := bufio.NewReaderSize(r, 64<<10)
	var last time.Time
	usage, done := false, false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 6 && bytes.HasPrefix(line, []byte("data: ")) {
			now := time.Now()
			switch {
			case bytes.HasPrefix(line[6:], []byte("[DONE]")):
				done = true
			case bytes.Contains(line, []byte(`"usage":{`)):
				usage = true
			case bytes.Contains(line, []byte(`"content":"x`)):
				if s.chunks == 0 {
					s.ttft = now.Sub(start)
				} else {
					s.gaps = append(s.gaps, now.Sub(last))
				}
				last = now
				s.chunks++
			}
		}
		if err != nil {
			break
		}
	}
	s.latency = time.Since(start)
	s.truncated = !done || !usage || s.chunks != want
	if s.truncated {
		fmt.Fprintf(os.Stderr, "truncated stream: %d/%d chunks, usage %v, [DONE] %v, after %v\n", s.chunks, want, usage, done, s.latency)
	}
	return s
}

// runLoad drives spec against t and aggregates.
func runLoad(ctx context.Context, t target, spec loadSpec) loadResult {
	c := newClient(spec.concurrency)
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	var res loadResult
	record := func(s sample) {
		mu.Lock()
		defer mu.Unlock()
		res.requests++
		switch {
		case s.err:
			res.errors++
			return
		case s.truncated:
			res.truncated++
		}
		res.chunks += int64(s.chunks)
		res.latency = append(res.latency, s.latency)
		res.ttfb = append(res.ttfb, s.ttfb)
		if spec.stream {
			res.ttft = append(res.ttft, s.ttft)
			res.gaps = append(res.gaps, s.gaps...)
		}
	}
	start := time.Now()
	rctx := ctx
	if spec.duration > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, spec.duration)
		defer cancel()
	}
	if spec.rate > 0 {
		openLoop(rctx, c, t, spec, record)
	} else {
		closedLoop(rctx, c, t, spec, record)
	}
	res.elapsed = time.Since(start)
	return res
}

func closedLoop(ctx context.Context, c *http.Client, t target, spec loadSpec, record func(sample)) {
	var issued atomic.Int64
	var wg sync.WaitGroup
	for range spec.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				if spec.requests > 0 && issued.Add(1) > int64(spec.requests) {
					return
				}
				s := do(context.Background(), c, t, spec)
				if ctx.Err() == nil || spec.requests > 0 {
					record(s)
				}
			}
		})
	}
	wg.Wait()
}

func openLoop(ctx context.Context, c *http.Client, t target, spec loadSpec, record func(sample)) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / spec.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
			wg.Go(func() { record(do(context.Background(), c, t, spec)) })
		}
	}
}

// holdStreams opens n streams on a hold-* model and returns once each has
// delivered its first content chunk; cancel closes them all.
func holdStreams(ctx context.Context, t target, n int) (cancel func(), err error) {
	hctx, stop := context.WithCancel(ctx)
	c := newClient(n)
	ready := make(chan error, n)
	var wg sync.WaitGroup
	// Open in waves of at most 256 at a time: the figure is memory per
	// open stream, not how a system takes a burst of thousands of new
	// connections in the same millisecond.
	opening := make(chan struct{}, 256)
	for range n {
		opening <- struct{}{}
		wg.Go(func() {
			opened := func(err error) { ready <- err; <-opening }
			req, _ := http.NewRequestWithContext(hctx, http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(body(t.model, true, 0)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-bench")
			for k, v := range t.headers {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				opened(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				opened(fmt.Errorf("status %d", resp.StatusCode))
				return
			}
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					opened(err)
					return
				}
				if strings.Contains(line, `"content":"x`) {
					opened(nil)
					break
				}
			}
			<-hctx.Done()
		})
	}
	var errs []error
	for range n {
		if e := <-ready; e != nil {
			errs = append(errs, e)
		}
	}
	cancel = func() { stop(); wg.Wait(); c.CloseIdleConnections() }
	if len(errs) > 0 {
		cancel()
		return nil, fmt.Errorf("%d of %d streams failed to open: %v", len(errs), n, errs[0])
	}
	return cancel, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

var errNoSystem = errors.New("system not available")

// runAdhoc runs one load against any OpenAI-compatible URL and prints the
// figures (a development aid; the report comes from run).
func runAdhoc(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	url := fs.String("url", "", "base URL")
	model := fs.String("model", "bench", "model")
	stream := fs.Bool("stream", false, "stream")
	conc := fs.Int("c", 16, "concurrency")
	n := fs.Int("n", 1000, "requests")
	chunks := fs.Int("chunks", 32, "content chunks a stream must carry")
	pad := fs.Int("pad", 0, "the user message's size in bytes (0: a short message)")
	hold := fs.Int("hold", 0, "instead of a load: open this many streams on a hold-* model and hold them until interrupted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hold > 0 {
		release, err := holdStreams(ctx, target{url: *url, model: *model}, *hold)
		if err != nil {
			return err
		}
		fmt.Printf("holding %d streams\n", *hold)
		<-ctx.Done()
		release()
		return nil
	}
	res := runLoad(ctx, target{url: *url, model: *model}, loadSpec{stream: *stream, concurrency: *conc, requests: *n, chunks: *chunks, padBytes: *pad})
	fmt.Printf("%d requests in %v (%.0f/s), %d errors, %d truncated, p50 %v p99 %v ttft p50 %v\n", res.requests, res.elapsed.Round(time.Millisecond),
		float64(res.requests)/res.elapsed.Seconds(), res.errors, res.truncated, percentile(res.latency, 0.5), percentile(res.latency, 0.99), percentile(res.ttft, 0.5))
	return nil
}
