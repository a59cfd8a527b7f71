package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestAdminTokenLeavesHealthOpen: with an admin token, the kubelet's
// probes and the status page itself need none; the data does, as a
// bearer token or the cookie the status page's sign-in sets.
func TestAdminTokenLeavesHealthOpen(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Admin.TokenSHA256 = HashToken("s3cret")
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := g.adminHandler()
	do := func(r *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	get := func(path string) *http.Request { return httptest.NewRequest(http.MethodGet, path, nil) }
	for _, p := range []string{"/healthz", "/readyz", "/status"} {
		if c := do(get(p)).Code; c == http.StatusUnauthorized {
			t.Errorf("%s needs the token (%d): the readiness probe would fail", p, c)
		}
	}
	for _, p := range []string{"/metrics", "/admin/providers", "/admin/nodes", "/admin/events"} {
		if c := do(get(p)).Code; c != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", p, c)
		}
	}
	r := get("/admin/providers")
	r.Header.Set("Authorization", "Bearer s3cret")
	if c := do(r).Code; c != http.StatusOK {
		t.Fatalf("bearer: %d", c)
	}
	login := func(token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/admin/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return do(r)
	}
	if rec := login("wrong"); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("wrong token: %d %v", rec.Code, rec.Result().Cookies())
	}
	rec := login("s3cret")
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusNoContent || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: %d %+v", rec.Code, cookies)
	}
	r = get("/admin/providers")
	r.AddCookie(cookies[0])
	if c := do(r).Code; c != http.StatusOK {
		t.Fatalf("with the cookie: %d", c)
	}
}

// TestAdminOffLoopbackNeedsToken: an admin listener others can reach
// without a token is a configuration error naming the key.
func TestAdminOffLoopbackNeedsToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdminListen = "0.0.0.0:8081"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "admin.token_sha256") {
		t.Fatalf("validate: %v", err)
	}
	cfg.Admin.TokenSHA256 = HashToken("x")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
