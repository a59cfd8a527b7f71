package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// authenticator checks client API keys. Keys are stored as SHA-256
// hashes and compared in constant time; keys in a query string are
// refused; failed attempts are rate-limited per client address.
type authenticator struct {
	ring  atomic.Pointer[keyring] // replaced whole on reload
	fails failLimiter
}

// keyring is the configured key material, immutable once built.
type keyring struct {
	keys    [][]byte // raw sha256 sums
	ids     []string // key ids, by index of keys
	limit   int      // failures per minute per address
	trusted []*net.IPNet
}

func newAuthenticator(c AuthConfig) *authenticator {
	a := &authenticator{}
	a.fails.limit = func() int { return a.ring.Load().limit }
	a.setKeys(c)
	return a
}

// setKeys installs c's keys, limit and trusted proxies; requests already
// authenticated are unaffected, failure windows are kept.
func (a *authenticator) setKeys(c AuthConfig) {
	r := &keyring{limit: c.FailuresPerMinute}
	if r.limit <= 0 {
		r.limit = 20
	}
	for _, k := range c.Keys {
		b, _ := hex.DecodeString(strings.ToLower(k.SHA256))
		r.keys, r.ids = append(r.keys, b), append(r.ids, k.ID)
	}
	for _, cidr := range c.TrustedProxies {
		if _, n, err := net.ParseCIDR(cidr); err == nil {
			r.trusted = append(r.trusted, n)
		}
	}
	a.ring.Store(r)
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

// check authenticates r and names the key that matched. A valid key
// always passes: only failures are limited, per client address (behind a
// trusted proxy, the address it forwarded), so one misconfigured client
// never locks out the others — nor a valid key from the same address.
func (a *authenticator) check(r *http.Request) (authResult, string) {
	ring := a.ring.Load()
	if len(ring.keys) == 0 {
		return authOK, ""
	}
	addr := a.clientAddr(r)
	q := r.URL.Query()
	for _, p := range queryKeyParams {
		if q.Has(p) {
			return a.failure(addr, authQueryKey), ""
		}
	}
	key := bearer(r)
	if key == "" {
		return a.failure(addr, authMissing), ""
	}
	found := ring.find(key)
	if found < 0 {
		return a.failure(addr, authInvalid), ""
	}
	return authOK, ring.ids[found]
}

// verify checks r's credential against the running keys as check does,
// without counting a failure (the request was counted when its headers
// arrived): the admission's second look, after the body was read.
func (a *authenticator) verify(r *http.Request) (authResult, string) {
	ring := a.ring.Load()
	if len(ring.keys) == 0 {
		return authOK, ""
	}
	key := bearer(r)
	if key == "" {
		return authMissing, ""
	}
	if i := ring.find(key); i >= 0 {
		return authOK, ring.ids[i]
	}
	return authInvalid, ""
}

// find is the index of key in the ring, -1 when it is not there; every
// entry is compared, in constant time.
func (ring *keyring) find(key string) int {
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i, k := range ring.keys {
		if subtle.ConstantTimeCompare(sum[:], k) == 1 {
			found = i
		}
	}
	return found
}

// failure counts a failed attempt from addr and returns r, or
// authThrottled once addr is over its limit.
func (a *authenticator) failure(addr string, r authResult) authResult {
	if !a.fails.fail(addr) {
		return authThrottled
	}
	return r
}

// clientAddr is the address failures are counted against: the peer, or —
// when the peer is a trusted proxy — the nearest untrusted address in
// X-Forwarded-For.
func (a *authenticator) clientAddr(r *http.Request) string {
	addr := clientAddr(r)
	if !a.isTrusted(addr) {
		return addr
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h == "" {
			continue
		}
		if !a.isTrusted(h) {
			return h
		}
		addr = h
	}
	return addr
}

func (a *authenticator) isTrusted(addr string) bool {
	ip := net.ParseIP(addr)
	for _, n := range a.ring.Load().trusted {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
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
