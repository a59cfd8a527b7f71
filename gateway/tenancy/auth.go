package tenancy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// Authenticator checks client API keys. Keys are stored as SHA-256
// hashes and compared in constant time; keys in a query string are
// refused; failed attempts are rate-limited per client address.
type Authenticator struct {
	ring  atomic.Pointer[keyring] // replaced whole on reload
	fails FailLimiter
}

// keyring is the configured key material, immutable once built.
type keyring struct {
	keys    [][]byte // raw sha256 sums
	ids     []string // key ids, by index of keys
	limit   int      // failures per minute per address
	trusted []*net.IPNet
}

// AuthSettings is what the Authenticator checks against: the keys, the
// failures per minute per address before 429 (default 20), and the
// trusted front proxies.
type AuthSettings struct {
	Keys              []KeyConfig
	FailuresPerMinute int
	TrustedProxies    []string
}

// NewAuthenticator returns an authenticator of c.
func NewAuthenticator(c AuthSettings) *Authenticator {
	a := &Authenticator{}
	a.fails.Limit = func() int { return a.ring.Load().limit }
	a.SetKeys(c)
	return a
}

// SetKeys installs c's keys, limit and trusted proxies; requests already
// authenticated are unaffected, failure windows are kept.
func (a *Authenticator) SetKeys(c AuthSettings) {
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

// AuthResult is the verdict on one request.
type AuthResult int

const (
	AuthOK AuthResult = iota
	AuthMissing
	AuthInvalid
	AuthQueryKey
	AuthThrottled
)

// queryKeyParams are query parameters that would carry a credential.
var queryKeyParams = []string{"api_key", "api-key", "key", "apikey", "token", "access_token"}

// check authenticates r and names the key that matched. A valid key
// always passes: only failures are limited, per client address (behind a
// trusted proxy, the address it forwarded), so one misconfigured client
// never locks out the others — nor a valid key from the same address.
func (a *Authenticator) Check(r *http.Request) (AuthResult, string) {
	ring := a.ring.Load()
	if len(ring.keys) == 0 {
		return AuthOK, ""
	}
	addr := a.ClientAddr(r)
	q := r.URL.Query()
	for _, p := range queryKeyParams {
		if q.Has(p) {
			return a.failure(addr, AuthQueryKey), ""
		}
	}
	key := Bearer(r)
	if key == "" {
		return a.failure(addr, AuthMissing), ""
	}
	found := ring.find(key)
	if found < 0 {
		return a.failure(addr, AuthInvalid), ""
	}
	return AuthOK, ring.ids[found]
}

// verify checks r's credential against the running keys as check does,
// without counting a failure (the request was counted when its headers
// arrived): the admission's second look, after the body was read.
func (a *Authenticator) Verify(r *http.Request) (AuthResult, string) {
	ring := a.ring.Load()
	if len(ring.keys) == 0 {
		return AuthOK, ""
	}
	key := Bearer(r)
	if key == "" {
		return AuthMissing, ""
	}
	if i := ring.find(key); i >= 0 {
		return AuthOK, ring.ids[i]
	}
	return AuthInvalid, ""
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
// AuthThrottled once addr is over its limit.
func (a *Authenticator) failure(addr string, r AuthResult) AuthResult {
	if !a.fails.Fail(addr) {
		return AuthThrottled
	}
	return r
}

// clientAddr is the address failures are counted against: the peer, or —
// when the peer is a trusted proxy — the nearest untrusted address in
// X-Forwarded-For.
func (a *Authenticator) ClientAddr(r *http.Request) string {
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

func (a *Authenticator) isTrusted(addr string) bool {
	trusted := a.ring.Load().trusted
	if len(trusted) == 0 {
		return false // no trusted proxies (the default): no address to parse
	}
	ip := net.ParseIP(addr)
	for _, n := range trusted {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// Bearer is the credential a request carries: its Authorization bearer
// token, else its api-key header.
func Bearer(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	if v := r.Header.Get("X-Api-Key"); v != "" { // Anthropic's SDKs
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
