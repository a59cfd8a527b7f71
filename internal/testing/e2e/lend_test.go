package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/nodeagent"
)

// On the in-process channel a streamed answer's upstream reads are lent
// to the edge (internal/inproc's Lend): the edge's request goroutine
// waits in the upstream body read itself, so a chunk reaches the client
// on the goroutine its read woke, with no handoff between the node's
// goroutine and the edge's. A held stream shows it: its edge request
// goroutine is parked under the tunnel's read, and none waits in the
// attempt's receive for a message from another goroutine.
func TestInProcessStreamReadsOnTheEdgesGoroutine(t *testing.T) {
	const n = 4
	c, _ := holdingCluster(t, Options{Link: LinkInProcess})
	closeAll := holdStreams(t, c.URL, "hold", n)
	defer closeAll()
	// A stream whose first chunk the client has just read may still be on
	// its way back into the read: the held state settles.
	reading, waiting := 0, 0
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("of %d held streams' edge goroutines, %d read their upstream and %d wait for the node's goroutine", n, reading, waiting)
		}
	})
	wait.Until(t, func() bool {
		reading, waiting = heldEdgeGoroutines()
		return reading == n && waiting == 0
	})
}

// Handed over, the reads keep no goroutine of the node's: the attempt's
// goroutine returns once it lent them (internal/inproc's Hand), and the
// attempt's end runs on a goroutine started when they end. A held stream
// shows it: no goroutine but the edge's waits in the node's attempt —
// its work, the loan or the wait for the stream's next work.
func TestHeldInProcessStreamKeepsNoNodeGoroutine(t *testing.T) {
	const n = 4
	c, _ := holdingCluster(t, Options{Link: LinkInProcess})
	closeAll := holdStreams(t, c.URL, "hold", n)
	defer closeAll()
	var node []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%d node goroutines in held streams' attempts:\n%s", len(node), strings.Join(node, "\n\n"))
		}
	})
	wait.Until(t, func() bool {
		reading, _ := heldEdgeGoroutines()
		node = nil
		for _, g := range goroutineStacks() {
			if !strings.Contains(g, "streamgate.(*runtime).pump") &&
				(strings.Contains(g, "nodeagent.(*Agent).serve") || strings.Contains(g, "nodeagent.(*Agent).awaitNext") || strings.Contains(g, "inproc.(*clientStream).Lend")) {
				node = append(node, g)
			}
		}
		return reading == n && len(node) == 0
	})
}

// heldEdgeGoroutines counts the edge's request goroutines of streams
// (those in the runtime's pump) that wait in the lent upstream read, and
// those that wait elsewhere.
func heldEdgeGoroutines() (reading, waiting int) {
	for _, g := range goroutineStacks() {
		if !strings.Contains(g, "streamgate.(*runtime).pump") {
			continue
		}
		if strings.Contains(g, "httpx.(*tunnelBody).step") && strings.Contains(g, "net/http.(*body).Read") {
			reading++
		} else {
			waiting++
		}
	}
	return reading, waiting
}

// goroutineStacks is every goroutine's stack, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A head that waits past the node's age bound for its first body (a slow
// first token) is sent with that body while the reads are lent: the age
// timer rests during a loan, where its firing would be a second sender
// beside the read the edge is running. Every byte arrives, in order.
func TestLentStreamWithASlowFirstToken(t *testing.T) {
	chunks := []string{
		"data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"late\"},\"finish_reason\":null}]}\n\n",
		"data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		"data: [DONE]\n\n",
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_ = rc.Flush() // the head alone
		select {
		case <-time.After(1200 * time.Millisecond): // past the node's one-second age bound
		case <-r.Context().Done():
			return
		}
		for _, c := range chunks {
			_, _ = io.WriteString(w, c)
			_ = rc.Flush()
		}
	}))
	t.Cleanup(up.Close)
	c := Start(t, Options{Link: LinkInProcess}, func(*Cluster) []NodeSpec {
		p := nodeagent.ProviderConfig{ID: "t", Adapter: "openai", Path: nodeagent.PathTunnel, BaseURL: up.URL + "/v1", Models: []string{"slow"}, Capacity: 4}
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{p}}}
	})
	resp, err := http.Post(c.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %s", resp.StatusCode, err, body)
	}
	if want := strings.Join(chunks, ""); string(body) != want {
		t.Fatalf("body %q, want the upstream's bytes %q", body, want)
	}
}
