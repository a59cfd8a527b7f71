package tenancy

import (
	"slices"
	"strings"

	"github.com/iopgw/iop/internal/ids"
)

// KeyConfig is one client key, stored as a hash.
type KeyConfig struct {
	ID     string `koanf:"id"`     // public key id (for logs, metrics and /admin/keys)
	SHA256 string `koanf:"sha256"` // hex SHA-256 of the key
	// Limits bound the key's use (none by default).
	Limits KeyLimits `koanf:"limits"`
	// Models the key may use (empty: any).
	Models []string `koanf:"models"`
}

// allows reports whether the key's model list admits model.
func (k KeyConfig) allows(model string) bool {
	return len(k.Models) == 0 || slices.ContainsFunc(k.Models, func(m string) bool { return strings.EqualFold(m, model) })
}

// HashToken is the hex SHA-256 of a token, as the configuration stores
// client keys (and node and admin tokens).
func HashToken(token string) string {
	return ids.Hash(token)
}
