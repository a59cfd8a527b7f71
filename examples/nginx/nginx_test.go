// Package nginx holds the nginx front-proxy example and its check.
package nginx

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

// TestFrontProxyOutlastsStallHandling is RELIABILITY.md R23: iop sends no
// client heartbeats, so a front proxy must not time out a silent stream
// before iop has detected the stall (300 s) and probed the provider
// (5 s). The example nginx config must say so, and stream unbuffered.
func TestFrontProxyOutlastsStallHandling(t *testing.T) {
	b, err := os.ReadFile("iop.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	need := time.Duration(execution.DefaultResponseStallTimeoutMS)*time.Millisecond + 5*time.Second
	for _, directive := range []string{"proxy_read_timeout", "proxy_send_timeout"} {
		m := regexp.MustCompile(`(?m)^\s*` + directive + `\s+(\d+)s;`).FindStringSubmatch(conf)
		if m == nil {
			t.Fatalf("%s is not set in seconds", directive)
		}
		d, _ := time.ParseDuration(m[1] + "s")
		if d <= need {
			t.Errorf("%s %v does not outlast iop's stall handling (%v)", directive, d, need)
		}
	}
	for _, want := range []string{"proxy_buffering off;", "proxy_http_version 1.1;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("missing %q", want)
		}
	}
}
