// Package ids makes and bounds the identifiers the edge writes: random
// request and attempt ids, identifiers a peer chose clipped before they
// reach a log, and the hash configurations store tokens as.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
)

// New returns a random 96-bit identifier in hex.
func New() string { return NewWith("") }

// NewWith returns prefix followed by a random 96-bit identifier in hex,
// made in one allocation (a request makes several: its request, run and
// attempt ids).
func NewWith(prefix string) string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	var h [2 * len(r)]byte
	hex.Encode(h[:], r[:])
	var b strings.Builder
	b.Grow(len(prefix) + len(h))
	b.WriteString(prefix)
	b.Write(h[:])
	return b.String()
}

// Clip bounds an identifier a peer chose (a node id, a model name) to 64
// bytes before it is logged.
func Clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// Hash is the hex SHA-256 of a token, the form configurations store
// client, admin and node tokens in.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// PathParam is an identifier a client sent as a URL path segment, its
// percent-encoding undone (the official SDKs encode a model name's "/" as
// %2F); the segment as it came when it does not decode.
func PathParam(segment string) string {
	if s, err := url.PathUnescape(segment); err == nil {
		return s
	}
	return segment
}
