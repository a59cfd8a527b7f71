package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRequestMetricsByRouteAndClass: each request counts once under its
// route pattern and status class, and its duration under its route —
// through the collectors the edge keeps per route after the first.
func TestRequestMetricsByRouteAndClass(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Auth.Keys = []KeyConfig{{ID: "k", SHA256: HashToken("sk-k")}}
	g := newTestGateway(t, cfg)
	get := func(path, key string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		g.echo.ServeHTTP(rec, r)
		return rec.Code
	}
	for range 3 {
		if c := get("/v1/models", "sk-k"); c != http.StatusOK {
			t.Fatalf("GET /v1/models: %d", c)
		}
	}
	for range 2 {
		if c := get("/v1/models", ""); c != http.StatusUnauthorized {
			t.Fatalf("GET /v1/models without a key: %d", c)
		}
	}
	get("/no/such/route", "sk-k")
	for _, c := range []struct {
		route, class string
		want         float64
	}{{"/v1/models", "2xx", 3}, {"/v1/models", "4xx", 2}, {"unmatched", "4xx", 1}} {
		if n := testutil.ToFloat64(g.metrics.requests.WithLabelValues(c.route, c.class)); n != c.want {
			t.Errorf("requests{route=%q, code=%q} = %v, want %v", c.route, c.class, n, c.want)
		}
	}
	if n := testutil.CollectAndCount(g.metrics.requests); n != 3 {
		t.Errorf("%d request series, want 3 (no class counted that no request had)", n)
	}
	if n := testutil.CollectAndCount(g.metrics.duration); n != 2 {
		t.Errorf("%d duration series, want 2 (/v1/models and unmatched)", n)
	}
}
