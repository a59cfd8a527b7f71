package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// authenticator checks client API keys. Keys are stored as SHA-256
// hashes and compared in constant time; keys in a query string are
// refused; failed attempts are rate-limited per client address.
type authenticator struct {
	keys  [][]byte // raw sha256 sums
	limit int      // failures per minute per address

	mu       sync.Mutex // guards failures
	failures map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newAuthenticator(c AuthConfig) *authenticator {
	a := &authenticator{limit: c.FailuresPerMinute, failures: map[string]*failWindow{}}
	if a.limit <= 0 {
		a.limit = 20
	}
	for _, k := range c.Keys {
		b, _ := hex.DecodeString(strings.ToLower(k.SHA256))
		a.keys = append(a.keys, b)
	}
	return a
}

// authResult is the verdict on one request.
type authResult int

const (
	authOK authResult = iota
	authMissing
	authInvalid
	authQueryKey
	authThrottled
)

// queryKeyParams are query parameters that would carry a credential.
var queryKeyParams = []string{"api_key", "api-key", "key", "apikey", "token", "access_token"}

// check authenticates r.
func (a *authenticator) check(r *http.Request) authResult {
	if len(a.keys) == 0 {
		return authOK
	}
	addr := clientAddr(r)
	if a.throttled(addr) {
		return authThrottled
	}
	q := r.URL.Query()
	for _, p := range queryKeyParams {
		if q.Has(p) {
			a.fail(addr)
			return authQueryKey
		}
	}
	key := bearer(r)
	if key == "" {
		a.fail(addr)
		return authMissing
	}
	sum := sha256.Sum256([]byte(key))
	match := 0
	for _, k := range a.keys {
		match |= subtle.ConstantTimeCompare(sum[:], k)
	}
	if match != 1 {
		a.fail(addr)
		return authInvalid
	}
	return authOK
}

func bearer(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(r.Header.Get("Api-Key"))
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (a *authenticator) throttled(addr string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.failures[addr]
	return w != nil && time.Since(w.start) < time.Minute && w.n >= a.limit
}

func (a *authenticator) fail(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	w := a.failures[addr]
	if w == nil || now.Sub(w.start) >= time.Minute {
		if len(a.failures) > 100000 { // bound memory under address floods
			a.failures = map[string]*failWindow{}
		}
		w = &failWindow{start: now}
		a.failures[addr] = w
	}
	w.n++
}
