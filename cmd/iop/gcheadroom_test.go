package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"

	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
)

// TestDevSetsTheCollectorsHeadroom: the running iop dev keeps its
// gc_headroom_bytes between collections — its /metrics shows the
// collector's percent raised above the default while the live heap is
// small — and gives the default back when it stops.
func TestDevSetsTheCollectorsHeadroom(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: the headroom leaves it alone by design")
	}
	cfg := defaultDevConfig()
	cfg.Gateway.Listen, cfg.Gateway.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Gateway.GCHeadroomBytes = 1 << 30 // far above this test binary's live heap
	d := launchDev(t, cfg, &logbuf.Buffer{})
	defer d.stop()
	gogc := func() int {
		resp, err := http.Get(d.admin + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		p, _ := strconv.Atoi(string(m[1]))
		return p
	}
	wait.Until(t, func() bool {
		runtime.GC() // the percent is set as each collection ends
		return gogc() > 1000
	})
	if err := d.stop(); err != nil {
		t.Fatalf("iop dev: %v", err)
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if p := s[0].Value.Uint64(); p != 100 {
		t.Fatalf("after iop dev stopped the collector's percent is %d, want the default 100", p)
	}
}
