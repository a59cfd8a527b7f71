package tenancy

import (
	"net/http/httptest"
	"testing"
)

// TestAuthLimiterNeverLocksOutValidKeys: failures are limited per client
// address — behind a trusted proxy, the address it forwarded — and a
// valid key always passes.
func TestAuthLimiterNeverLocksOutValidKeys(t *testing.T) {
	a := NewAuthenticator(AuthSettings{Keys: []KeyConfig{{ID: "k1", SHA256: HashToken("good")}}, FailuresPerMinute: 3,
		TrustedProxies: []string{"10.0.0.0/8"}})
	req := func(peer, xff, key string) (AuthResult, string) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.RemoteAddr = peer + ":5555"
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		r.Header.Set("Authorization", "Bearer "+key)
		return a.Check(r)
	}
	for range 10 {
		req("10.0.0.1", "203.0.113.7", "bad") // one misconfigured client behind the proxy
	}
	if res, _ := req("10.0.0.1", "203.0.113.7", "bad"); res != AuthThrottled {
		t.Fatalf("the failing client: %v", res)
	}
	if res, id := req("10.0.0.1", "203.0.113.7", "good"); res != AuthOK || id != "k1" {
		t.Fatalf("a valid key from the throttled address: %v %q", res, id)
	}
	if res, _ := req("10.0.0.1", "198.51.100.9", "bad"); res != AuthInvalid {
		t.Fatalf("another client behind the same proxy: %v", res)
	}
	// An untrusted peer cannot pick its address with X-Forwarded-For.
	for range 10 {
		req("192.0.2.1", "198.51.100.200", "bad")
	}
	if res, _ := req("192.0.2.1", "198.51.100.201", "bad"); res != AuthThrottled {
		t.Fatalf("spoofed X-Forwarded-For from an untrusted peer: %v", res)
	}
}
