package openai

import (
	"crypto/rand"
	"encoding/hex"
)

// NewChatID returns a fresh chat completion id, chatcmpl-<24 hex>.
func NewChatID() string { return "chatcmpl-" + randHex(12) }

// NewResponseID returns a fresh Response id, resp_<48 hex>.
func NewResponseID() string { return "resp_" + randHex(24) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
