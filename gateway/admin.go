package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminHandler serves the admin listener: /metrics, /healthz, /readyz and
// /admin/*. Nothing is registered on http.DefaultServeMux.
func (g *Gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	gather := prometheus.Gatherers{prometheus.DefaultGatherer, g.reg}
	mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", g.readyz)
	mux.HandleFunc("GET /admin/providers", g.adminProviders)
	mux.HandleFunc("GET /admin/nodes", g.adminNodes)
	return g.adminAuth(mux)
}

// adminAuth requires the admin token when one is configured.
func (g *Gateway) adminAuth(next http.Handler) http.Handler {
	want, _ := hex.DecodeString(strings.ToLower(g.cfg.Admin.TokenSHA256))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) > 0 && r.URL.Path != "/healthz" {
			sum := sha256.Sum256([]byte(bearer(r)))
			if subtle.ConstantTimeCompare(sum[:], want) != 1 {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	ready := g.ready
	g.mu.Unlock()
	if !ready || len(g.hub.Nodes()) == 0 {
		http.Error(w, "not ready: no node connected", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (g *Gateway) adminProviders(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"providers": g.pool.Snapshot()})
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
