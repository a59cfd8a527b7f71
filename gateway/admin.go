package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iopgw/iop/gateway/tenancy"
)

//go:embed status.html
var statusPage []byte

// route is one admin route.
type route struct {
	Method, Path string
	handler      http.Handler
}

// AdminRoutes lists the admin listener's routes (the OpenAPI document is
// checked against this list).
func (g *Gateway) AdminRoutes() []route {
	gather := prometheus.Gatherers{prometheus.DefaultGatherer, g.reg}
	return []route{
		{"GET", "/metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{EnableOpenMetrics: true})},
		{"GET", "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })},
		{"GET", "/readyz", http.HandlerFunc(g.readyz)},
		{"GET", "/admin/providers", http.HandlerFunc(g.adminProviders)},
		{"GET", "/admin/nodes", http.HandlerFunc(g.adminNodes)},
		{"GET", "/admin/events", http.HandlerFunc(g.adminEvents)},
		{"GET", "/admin/keys", http.HandlerFunc(g.adminKeys)},
		{"GET", "/status", http.HandlerFunc(g.statusPage)},
		{"POST", "/admin/login", http.HandlerFunc(g.adminLogin)},
	}
}

// adminHandler serves the admin listener. Nothing is registered on
// http.DefaultServeMux.
func (g *Gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range g.AdminRoutes() {
		mux.Handle(r.Method+" "+r.Path, r.handler)
	}
	return g.adminAuth(mux)
}

func (g *Gateway) statusPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	_, _ = w.Write(statusPage)
}

func (g *Gateway) adminEvents(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"events": g.events.Recent()})
}

// adminCookie holds the admin token for the status page, set by
// /admin/login: never in a URL, not readable by scripts, same-site only.
const adminCookie = "iop_admin"

// openAdminPaths need no token: health reveals nothing, the status page
// is static (its data comes from the protected API), and the login form
// is how the page gets the token.
var openAdminPaths = map[string]bool{"/healthz": true, "/readyz": true, "/status": true, "/admin/login": true}

// adminAuth requires the admin token, as a bearer token or the status
// page's cookie, when one is configured; without one (a loopback admin
// listener) it accepts only loopback Host names, so a page on another
// site cannot reach it by DNS rebinding.
func (g *Gateway) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		health := r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
		if !health && g.config().Admin.TokenSHA256 == "" && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: the admin listener has no token and answers only to a loopback Host (localhost, 127.0.0.1, [::1])",
				http.StatusForbidden)
			return
		}
		if !openAdminPaths[r.URL.Path] && !g.adminCheck(w, r, adminToken(r)) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminCheck reports whether token is the admin token; when it is not it
// answers the request: 401, or 429 once the client address failed
// auth.failures_per_minute times this minute. The right token is never
// throttled. Failures are counted and logged (sampled, no token).
func (g *Gateway) adminCheck(w http.ResponseWriter, r *http.Request, token string) bool {
	if g.adminTokenOK(token) {
		return true
	}
	addr := g.auth.ClientAddr(r)
	if !g.adminFails.Fail(addr) {
		g.metrics.adminAuthFailures.WithLabelValues("throttled").Inc()
		g.adminLog.Warn("admin authentication throttled for a client address", "remote", addr)
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many failed admin authentications from this address; retry in a minute", http.StatusTooManyRequests)
		return false
	}
	g.metrics.adminAuthFailures.WithLabelValues("invalid").Inc()
	g.adminLog.Warn("admin authentication failed", "remote", addr, "path", r.URL.Path)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return false
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost (and its subdomains), 127.0.0.0/8 or ::1.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminTokenOK reports whether token is the admin token (always, when
// none is configured).
func (g *Gateway) adminTokenOK(token string) bool {
	want, _ := hex.DecodeString(strings.ToLower(g.config().Admin.TokenSHA256))
	if len(want) == 0 {
		return true
	}
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

// adminToken is the request's bearer token, else its admin cookie.
func adminToken(r *http.Request) string {
	if t := tenancy.Bearer(r); t != "" {
		return t
	}
	if c, err := r.Cookie(adminCookie); err == nil {
		return c.Value
	}
	return ""
}

// adminLogin checks the posted token and, when right, sets the cookie
// the status page's requests carry.
func (g *Gateway) adminLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := r.PostFormValue("token")
	if !g.adminCheck(w, r, token) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: adminCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	ready := g.ready
	g.mu.Unlock()
	if !ready || !g.hub.Serving() { // a node whose providers are in the pool
		http.Error(w, "not ready: no node connected", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (g *Gateway) adminProviders(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"providers": g.pool.Snapshot(), "models": g.models.snapshot(g.config()),
		"config_generation": g.gen.Load().n})
}

func (g *Gateway) adminNodes(w http.ResponseWriter, _ *http.Request) {
	nodes := g.hub.Nodes()
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].NodeID < nodes[j].NodeID })
	writeJSON(w, map[string]any{"nodes": nodes})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
