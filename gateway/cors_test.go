package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCORS: nothing is allowed by default; with an allowed origin a
// preflight is answered without a key, the actual request still needs
// one and carries the exposed headers; another origin gets no grant.
func TestCORS(t *testing.T) {
	preflight := func(g *Gateway, origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodOptions, "/v1/models", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "GET")
		r.Header.Set("Access-Control-Request-Headers", "authorization,x-stainless-os")
		rec := httptest.NewRecorder()
		g.echo.ServeHTTP(rec, r)
		return rec
	}
	actual := func(g *Gateway, origin, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Origin", origin)
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		g.echo.ServeHTTP(rec, r)
		return rec
	}
	cfg := DefaultConfig()
	cfg.Auth.Keys = []KeyConfig{{ID: "k", SHA256: HashToken("sk-k")}}
	closed, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rec := preflight(closed, "https://app.example.com"); rec.Header().Get("Access-Control-Allow-Origin") != "" || rec.Code < 400 {
		t.Fatalf("CORS off: preflight got %d %v", rec.Code, rec.Header())
	}
	cfg.CORS.AllowedOrigins = []string{"https://app.example.com"}
	open, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := preflight(open, "https://app.example.com")
	h := rec.Header()
	if rec.Code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "x-stainless-os") || h.Get("Access-Control-Max-Age") != "600" {
		t.Fatalf("preflight: %d %v", rec.Code, h)
	}
	if rec := actual(open, "https://app.example.com", ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("actual request without a key: %d", rec.Code)
	}
	rec = actual(open, "https://app.example.com", "sk-k")
	if rec.Code != http.StatusOK || rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(rec.Header().Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Fatalf("actual request: %d %v", rec.Code, rec.Header())
	}
	if rec := preflight(open, "https://evil.example.net"); rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("another origin was granted: %v", rec.Header())
	}
}

func TestCORSConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cors CORSConfig
		want string
	}{
		{CORSConfig{AllowedOrigins: []string{"app.example.com"}}, "cors.allowed_origins[0]"},
		{CORSConfig{AllowedOrigins: []string{"https://app.example.com/path"}}, "cors.allowed_origins[0]"},
		{CORSConfig{AllowedOrigins: []string{"*"}, AllowCredentials: true}, "cors.allow_credentials"},
	} {
		cfg := DefaultConfig()
		cfg.CORS = tc.cors
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cors, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.CORS.AllowedOrigins = []string{"https://*.example.com", "http://localhost:5173", "*"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
