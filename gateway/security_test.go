package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iopgw/iop/gateway/tenancy"
)

// Issue 31, findings 7–13: reloads, admin sign-in, CORS patterns, the
// usage file. Each test is the finding's attack as written.

func newTestGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReloadChecksTheRunningAdminListener (finding 7): admin listens off
// loopback with a token; a reload that drops the admin section (the
// listener stays: it is restart-only) is refused, and the token still
// guards /metrics.
func TestReloadChecksTheRunningAdminListener(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdminListen, cfg.Admin.TokenSHA256 = "0.0.0.0:8081", HashToken("s3cret")
	g := newTestGateway(t, cfg)
	next := DefaultConfig() // the file without its admin: section (and so admin_listen at its default)
	if err := g.Reload(next); err == nil || !strings.Contains(err.Error(), "admin.token_sha256") {
		t.Fatalf("reload without the admin token: %v", err)
	}
	rec := httptest.NewRecorder()
	g.adminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://10.0.0.5:8081/metrics", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token after the refused reload: %d", rec.Code)
	}
}

// TestReloadNeverOpensTheGatewaySilently (finding 8): a file cut off after
// `nodes:` has no keys and no admin token; reloading it is refused unless
// the file says so explicitly.
func TestReloadNeverOpensTheGatewaySilently(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Auth.Keys = []KeyConfig{{ID: "a", SHA256: HashToken("sk-a")}}
	cfg.Admin.TokenSHA256 = HashToken("s3cret")
	g := newTestGateway(t, cfg)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:8080\nnodes:\n  - id: n\n    token: t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadFile(path); !errors.Is(err, ErrWeakerSecurity) || !strings.Contains(err.Error(), "auth.allow_anonymous") {
		t.Fatalf("truncated file: %v", err)
	}
	if len(g.Config().Auth.Keys) != 1 {
		t.Fatal("the refused reload changed the keys")
	}
	next := g.Config()
	next.Admin = AdminConfig{}
	if err := g.Reload(next); !errors.Is(err, ErrWeakerSecurity) || !strings.Contains(err.Error(), "admin.allow_no_token") {
		t.Fatalf("admin token dropped: %v", err)
	}
	next.Admin.AllowNoToken = true
	next.Auth = AuthConfig{AllowAnonymous: true}
	if err := g.Reload(next); err != nil {
		t.Fatalf("an explicit opening: %v", err)
	}
	if len(g.Config().Auth.Keys) != 0 || g.Config().Admin.TokenSHA256 != "" {
		t.Fatal("the explicit reload was not applied")
	}
}

// TestAdminSignInIsThrottled (finding 9): 2,000 wrong sign-ins and bearer
// tokens from one address are refused with 429 past the failure limit,
// counted; the right token still works from that address.
func TestAdminSignInIsThrottled(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Admin.TokenSHA256 = HashToken("s3cret")
	g := newTestGateway(t, cfg)
	h := g.adminHandler()
	login := func(token string) int {
		r := httptest.NewRequest(http.MethodPost, "/admin/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "203.0.113.7:4000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	codes := map[int]int{}
	for i := range 2000 {
		if i%2 == 0 {
			codes[login("guess")]++
			continue
		}
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header.Set("Authorization", "Bearer guess")
		r.RemoteAddr = "203.0.113.7:4001"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		codes[rec.Code]++
	}
	if codes[http.StatusUnauthorized] != 20 || codes[http.StatusTooManyRequests] != 1980 {
		t.Fatalf("2,000 wrong tokens: %v", codes)
	}
	if c := login("s3cret"); c != http.StatusNoContent {
		t.Fatalf("the right token after the flood: %d", c)
	}
	if n := testutil.ToFloat64(g.metrics.adminAuthFailures.WithLabelValues("throttled")); n != 1980 {
		t.Fatalf("throttled counted %v", n)
	}
}

// TestCORSWildcardsAreWholeLabels (finding 10): "https://*" with
// credentials and a wildcard inside a label are configuration errors; a
// subdomain pattern matches subdomains only, never a look-alike host.
func TestCORSWildcardsAreWholeLabels(t *testing.T) {
	for _, o := range []string{"https://*", "https://app.example.com*", "https://*example.com", "https://a.*.example.com", "https://*.com"} {
		cfg := DefaultConfig()
		cfg.CORS = CORSConfig{AllowedOrigins: []string{o}, AllowCredentials: true}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "cors.allowed_origins[0]") {
			t.Errorf("%s: %v", o, err)
		}
	}
	match := originMatcher([]string{"https://*.example.com", "https://app.example.org:8443"})
	for origin, want := range map[string]bool{
		"https://app.example.com": true, "https://a.b.example.com": true, "https://example.com": false,
		"https://app.example.com.evil.com": false, "https://evilexample.com": false, "http://app.example.com": false,
		"https://app.example.org:8443": true, "https://app.example.org": false, "https://app.example.org:8443.evil.com": false,
		"https://x_y.example.com": false,
	} {
		if got := match(origin); got != want {
			t.Errorf("%s: %v, want %v", origin, got, want)
		}
	}
}

// TestUsageFileRefusesSymlinks (finding 11): a usage file that is a
// symbolic link is refused with a clear error at start, and a save is
// durable (written whole, renamed, the link never replaced).
func TestUsageFileRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "usage.json")
	if err := os.WriteFile(real, []byte(`{"keys":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Auth.UsageFile = link
	if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symlinked usage file: %v", err)
	}
	tn := tenancy.New([]KeyConfig{{ID: "a"}}, nil)
	if err := tn.SaveUsage(link); err == nil {
		t.Fatal("saved through a symlink")
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	path := filepath.Join(dir, "plain.json")
	if err := tn.SaveUsage(path); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"a"`) {
		t.Fatalf("saved %s", b)
	}
}

// TestTokenlessAdminAnswersOnlyLoopbackHosts (finding 12): the default
// token-less loopback admin refuses a request whose Host is not loopback
// (DNS rebinding from a browser); the status page cannot be framed.
func TestTokenlessAdminAnswersOnlyLoopbackHosts(t *testing.T) {
	g := newTestGateway(t, DefaultConfig())
	h := g.adminHandler()
	for host, want := range map[string]int{
		"127.0.0.1:8081": http.StatusOK, "localhost:8081": http.StatusOK, "[::1]:8081": http.StatusOK,
		"attacker.example:8081": http.StatusForbidden, "127.0.0.1.nip.io:8081": http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodGet, "/admin/providers", nil)
		r.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	r.Host = "10.1.2.3:8081" // probes by address still answer
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Fatalf("/healthz by address: %d", rec.Code)
	}
	r = httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8081/status", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("status page CSP %q", rec.Header().Get("Content-Security-Policy"))
	}
}

// TestTracingChangeIsRestartOnly (finding 13): a reload that changes
// tracing says it needs a restart and keeps the running tracer's config.
func TestTracingChangeIsRestartOnly(t *testing.T) {
	g := newTestGateway(t, DefaultConfig())
	next := g.Config()
	next.Tracing.Enabled, next.Tracing.Endpoint = true, "http://127.0.0.1:4318"
	err := g.Reload(next)
	var rr *RestartRequiredError
	if !errors.As(err, &rr) || !strings.Contains(err.Error(), "tracing") {
		t.Fatalf("reload changing tracing: %v", err)
	}
	if g.Config().Tracing.Enabled {
		t.Fatal("the running configuration claims a tracer it does not have")
	}
}

// TestLogFlushChangeIsRestartOnly: the log's flush interval and the
// collector's headroom are the process's, set at start; a reload that
// changes them says so and keeps the running values, while the rest of
// the reload applies.
func TestLogFlushChangeIsRestartOnly(t *testing.T) {
	g := newTestGateway(t, DefaultConfig())
	next := g.Config()
	next.Log.FlushInterval, next.Log.AccessSample, next.GCHeadroomBytes = time.Second, 0.5, 0
	err := g.Reload(next)
	if !IsRestartRequired(err) || !strings.Contains(err.Error(), "log.flush_interval") || !strings.Contains(err.Error(), "gc_headroom_bytes") {
		t.Fatalf("reload changing log.flush_interval and gc_headroom_bytes: %v", err)
	}
	if got := g.Config(); got.Log.FlushInterval != DefaultLogFlush || got.GCHeadroomBytes != DefaultConfig().GCHeadroomBytes || got.Log.AccessSample != 0.5 {
		t.Fatalf("after the reload: flush_interval %v, gc_headroom_bytes %d, access_sample %v; want the running values and the new sample",
			got.Log.FlushInterval, got.GCHeadroomBytes, got.Log.AccessSample)
	}
}
