package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/iopgw/iop/nodeagent"
)

// TestAttemptStreamsAreReused: on either link, a node's attempts run on
// its parked streams, and a stream whose attempt finished is reparked to
// carry a later one: sequential requests (JSON and streamed, each
// answered in full) open no stream — every one is reparked after its
// attempt and none is dispatched — before and after a burst of
// concurrent ones, which all succeed.
func TestAttemptStreamsAreReused(t *testing.T) {
	c := Start(t, Options{Nodes: []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}}, nil)
	check := func(stream bool) {
		resp := chatAs(t, c.URL, "", stream)
		body := readAll(t, resp)
		if resp.StatusCode != 200 || (stream && !strings.Contains(body, "data: [DONE]")) || (!stream && !strings.Contains(body, `"finish_reason"`)) {
			t.Errorf("stream=%v: %d %s", stream, resp.StatusCode, body)
		}
	}
	counts := func() (dispatched, reparked float64) {
		return c.Metric(t, "iop_edge_attempt_streams_total", map[string]string{"kind": "dispatched"}),
			c.Metric(t, "iop_edge_attempt_streams_reparked_total", nil)
	}
	sequential := func() {
		t.Helper()
		d0, r0 := counts()
		for i := range 40 {
			check(i%2 == 0)
		}
		d1, r1 := counts()
		// The last attempt's repark may follow its answer by a moment.
		if d1 != d0 || r1-r0 < 39 {
			t.Fatalf("40 sequential attempts: %v dispatched, %v reparked; want 0 and at least 39", d1-d0, r1-r0)
		}
	}
	check(false) // the node is up, its connect probe answered
	sequential()
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() { check(i%2 == 1) })
	}
	wg.Wait()
	sequential()
}
