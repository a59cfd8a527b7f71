package pool

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// FuzzHealthObservationRedaction is F7 on the edge's overlay projection: a
// sentinel in every field of an observation never reaches a metric label
// or the log record.
func FuzzHealthObservationRedaction(f *testing.F) {
	f.Add("stall", "available", "applied", "unknown", "unavailable", "n1/p", true)
	f.Add("probe\n{\"level\":\"error\"}", "\x1b[31m", "", "", "", "", false)
	reg := prometheus.NewRegistry()
	buf := &bytes.Buffer{}
	o := NewHealthObservability(reg, slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	f.Fuzz(func(t *testing.T, source, evidence, decision, from, to, provider string, changed bool) {
		const s = "SENTINEL-"
		buf.Reset()
		o.observe(HealthObservation{source: s + source, evidence: s + evidence, decision: s + decision, from: s + from, to: s + to,
			changed: changed, provider: s + provider})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if out := fmt.Sprint(mfs) + buf.String(); strings.Contains(out, "SENTINEL") {
			t.Fatalf("sentinel in the output:\n%s", out)
		}
	})
}
