package gateway

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/iopgw/iop/gateway/fleet"
	"github.com/iopgw/iop/streamgate"
)

// badFunc records a configuration mistake under its key.
type badFunc func(key, format string, args ...any)

func (c *Config) checkListeners(bad badFunc) {
	for key, addr := range map[string]string{"listen": c.Listen, "node_listen": c.NodeListen} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			bad(key, "must be host:port")
		}
	}
	if c.AdminListen != "" {
		if host, _, err := net.SplitHostPort(c.AdminListen); err != nil {
			bad("admin_listen", "must be host:port or empty")
		} else if !loopback(host) && c.Admin.TokenSHA256 == "" {
			bad("admin.token_sha256", "required when admin_listen (%s) is not a loopback address: the admin API shows providers, nodes and metrics (/healthz and /readyz stay open)", c.AdminListen)
		}
	}
	if c.Admin.TokenSHA256 != "" && !isSHA256(c.Admin.TokenSHA256) {
		bad("admin.token_sha256", "must be 64 hex characters")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("tls", "cert_file and key_file go together")
	}
	if (c.NodeTLS.CertFile == "") != (c.NodeTLS.KeyFile == "") {
		bad("node_tls", "cert_file and key_file go together")
	}
	if c.NodeTLS.ClientCAFile != "" && c.NodeTLS.CertFile == "" {
		bad("node_tls.client_ca_file", "needs cert_file and key_file")
	}
}

func (c *Config) checkNodes(bad badFunc) {
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		key := fmt.Sprintf("nodes[%d]", i)
		if n.ID == "" || seen[n.ID] {
			bad(key+".id", "required and unique")
		}
		seen[n.ID] = true
		if (n.Token == "") == (n.TokenSHA256 == "") {
			bad(key, "exactly one of token and token_sha256 is required")
		}
		if n.TokenSHA256 != "" && !isSHA256(n.TokenSHA256) {
			bad(key+".token_sha256", "must be 64 hex characters")
		}
	}
	if nl := c.NodeLimits; nl.MaxStallTimeout <= 0 || nl.MaxCapacity <= 0 || nl.MaxProviders <= 0 || nl.MaxModels <= 0 ||
		nl.MaxConnsPerSource <= 0 || nl.MaxConns <= 0 {
		bad("node_limits", "every limit must be positive")
	}
	if nl := c.NodeLink; nl.OpenTimeout <= 0 || nl.HeartbeatInterval <= 0 || nl.HeartbeatTimeout < nl.HeartbeatInterval {
		bad("node_link", "open_timeout and heartbeat_interval must be positive, heartbeat_timeout at least heartbeat_interval")
	}
	if p := c.NodeLink.ParkedAttempts; p < 0 || p > fleet.MaxParkedAttempts {
		bad("node_link.parked_attempts", fmt.Sprintf("must be 0 to %d", fleet.MaxParkedAttempts))
	}
}

func (c *Config) checkAuth(bad badFunc) {
	for i, cidr := range c.Auth.TrustedProxies {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			bad(fmt.Sprintf("auth.trusted_proxies[%d]", i), "must be a CIDR such as 10.0.0.0/8")
		}
	}
	if c.Auth.DefaultMaxTokens < 0 {
		bad("auth.default_max_tokens", "must not be negative (0 or absent: 1024)")
	}
	ids := map[string]bool{}
	for i, k := range c.Auth.Keys {
		key := fmt.Sprintf("auth.keys[%d]", i)
		if !isSHA256(k.SHA256) {
			bad(key+".sha256", "must be 64 hex characters (sha256 of the key)")
		}
		if k.ID == "" || ids[k.ID] || len(k.ID) > 64 {
			bad(key+".id", "required, unique, at most 64 characters (it names the key in logs, metrics and /admin/keys)")
		}
		ids[k.ID] = true
		if l := k.Limits; l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.Concurrent < 0 || l.TokensPerDay < 0 || l.TokensPerMonth < 0 {
			bad(key+".limits", "must not be negative (0 or absent: no limit)")
		}
	}
}

func (c *Config) checkLimitsStore(bad badFunc) {
	ls := c.Auth.LimitsStore
	if ls.Redis == "" {
		return
	}
	if _, _, err := net.SplitHostPort(ls.Redis); err != nil {
		bad("auth.limits_store.redis", "must be host:port")
	}
	switch ls.Failure {
	case "", "open", "closed":
	default:
		bad("auth.limits_store.failure", "must be open or closed")
	}
	if ls.PasswordEnv != "" {
		if _, ok := os.LookupEnv(ls.PasswordEnv); !ok {
			bad("auth.limits_store.password_env", "names the environment variable %s, which is not set", ls.PasswordEnv)
		}
	}
	if ls.Timeout < 0 || ls.Window < 0 {
		bad("auth.limits_store", "timeout and window must not be negative")
	}
}

func (c *Config) checkLimits(bad badFunc) {
	if c.Limits.MaxBodyBytes <= 0 || c.Queue.MaxLength < 0 || c.Queue.MaxWait <= 0 {
		bad("limits/queue", "sizes and waits must be positive")
	}
	if _, err := streamgate.NewFilter(c.StreamGate.Filter.Rules); err != nil {
		bad("streamgate.filter", "%v", err)
	}
	if c.StreamGate.MaxAttempts < 1 {
		bad("streamgate.max_attempts", "must be at least 1")
	}
}

func (c *Config) checkTracing(bad badFunc) {
	if err := c.Tracing.Validate("tracing"); err != nil {
		key, msg, _ := strings.Cut(err.Error(), ": ")
		bad(key, "%s", msg)
	}
}

func (c *Config) checkLog(bad badFunc) {
	switch c.Log.Access {
	case AccessAll, AccessErrors, AccessOff:
	default:
		bad("log.access", "must be all, errors or off")
	}
	if c.Log.AccessSample < 0 || c.Log.AccessSample > 1 {
		bad("log.access_sample", "must be between 0 and 1")
	}
	if c.GCHeadroomBytes < 0 {
		bad("gc_headroom_bytes", "must not be negative (0 leaves the collector at the runtime's default)")
	}
	if c.Log.FlushInterval < 0 || c.Log.FlushInterval > maxLogFlush {
		bad("log.flush_interval", "must be between 0 (each line written at once) and %s", maxLogFlush)
	}
}

func (c *Config) checkModels(bad badFunc) {
	c.Retry.validate("retry", bad)
	for i, m := range c.Models {
		key := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			bad(key+".name", "required")
		}
		m.Retry.validate(key+".retry", bad)
	}
}
