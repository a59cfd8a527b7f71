// Package ids makes and bounds the identifiers the edge writes: random
// request and attempt ids, identifiers a peer chose clipped before they
// reach a log, and the hash configurations store tokens as.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// New returns a random 96-bit identifier in hex.
func New() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
