package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/iopgw/iop/openapi"
)

// TestOpenAPIMatchesRoutes fails when a route the gateway serves is missing
// from openapi/iop.yaml, or the document lists one it does not serve.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(openapi3.NewLoader().Context); err != nil {
		t.Fatalf("invalid document: %v", err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	g, err := New(DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	param := regexp.MustCompile(`:(\w+)`)
	for _, r := range g.echo.Routes() {
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for _, r := range g.AdminRoutes() {
		served[r.Method+" "+r.Path] = true
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("served but undocumented: %v\ndocumented but not served: %v", missing, extra)
	}
	// And it is served.
	rec := httptest.NewRecorder()
	g.echo.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if b, _ := io.ReadAll(rec.Body); rec.Code != 200 || !strings.HasPrefix(string(b), "openapi: 3.1.0") {
		t.Fatalf("GET /openapi.yaml: %d", rec.Code)
	}
}

func TestStatusPageServed(t *testing.T) {
	g, _ := New(DefaultConfig(), Options{})
	rec := httptest.NewRecorder()
	g.adminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8081/status", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "iop edge status") || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("%d %s", rec.Code, rec.Header())
	}
	for _, p := range []string{"/debug/pprof/", "/debug/vars"} {
		rec = httptest.NewRecorder()
		g.adminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost:8081"+p, nil))
		if rec.Code != 404 {
			t.Fatalf("%s on admin: %d", p, rec.Code)
		}
	}
	if h, _ := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)); h != nil {
		if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil)); pattern != "" {
			t.Fatalf("something registered %q on http.DefaultServeMux", pattern)
		}
	}
}
