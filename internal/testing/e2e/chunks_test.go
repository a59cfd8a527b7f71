package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/iopgw/iop/nodeagent"
)

// TestConcurrentStreamsByteExact: many streams at once, each with its own
// bytes in reads of every size, reach their clients byte for byte — on
// the in-process channel, where the node's body chunks are handed to the
// edge by reference and given back once written (eventstream.Chunk), and
// on the network link. A chunk given back too early would carry another
// stream's bytes.
func TestConcurrentStreamsByteExact(t *testing.T) {
	for _, link := range []Options{{Link: LinkInProcess}, {TCPNodeLink: true}} {
		name := "tcp"
		if link.Link == LinkInProcess {
			name = "in-process"
		}
		t.Run(name, func(t *testing.T) { concurrentByteExact(t, link) })
	}
}

// streamBody is the SSE answer of stream n: events of sizes from a few
// bytes to several KiB, each naming its stream.
func streamBody(n int) []string {
	var evs []string
	for i := range 40 {
		content := strings.Repeat(string(rune('a'+(n+i)%26)), (i*i*37+n)%3000)
		evs = append(evs, fmt.Sprintf("data: {\"id\":\"s%d\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d:%d:%s\"},\"finish_reason\":null}]}\n\n", n, n, i, content))
	}
	return append(evs, fmt.Sprintf("data: {\"id\":\"s%d\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", n))
}

func concurrentByteExact(t *testing.T, opts Options) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("X-Stream"))
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range streamBody(n) {
			_, _ = io.WriteString(w, ev)
			_ = rc.Flush()
		}
	}))
	t.Cleanup(up.Close)
	c := Start(t, opts, func(*Cluster) []NodeSpec {
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{{ID: "t", Adapter: "openai", Path: nodeagent.PathTunnel,
			BaseURL: up.URL + "/v1", Models: []string{"m"}, Capacity: 1000, ForwardHeaders: []string{"X-Stream"}}}}}
	})
	const streams = 48
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for n := range streams {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", c.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Stream", strconv.Itoa(n))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if want := strings.Join(streamBody(n), ""); err != nil || resp.StatusCode != 200 || string(got) != want {
				errs <- fmt.Errorf("stream %d: %d %v, %d bytes, want %d byte for byte", n, resp.StatusCode, err, len(got), len(want))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
