package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/streamgate"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "configs", "gateway.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || len(c.Nodes) != 1 || c.Limits.MaxBodyBytes != 16<<20 || c.StreamGate.MaxAttempts != 10 {
		t.Fatalf("loaded %+v", c)
	}
	// The example spells out the defaults: loading it changes nothing.
	if got, want := c.RetryPolicy("any"), streamgate.DefaultRetryPolicy(); got != want {
		t.Fatalf("example retry policy %+v, default %+v", got, want)
	}
}

// TestRetryPolicyInherits: a model's retry block overrides the gateway's
// field by field; unset fields inherit.
func TestRetryPolicyInherits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.yaml")
	yaml := "nodes: [{id: n, token: t}]\nretry: {retries: 1, backoff_base: 1s}\nmodels: [{name: big, retry: {retries: 0, first_token_timeout: 5s, retry_on: [connect]}}]\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	other, big := c.RetryPolicy("small"), c.RetryPolicy("BIG")
	if other.Retries != 1 || other.BackoffBase != time.Second || other.FirstTokenTimeout != 0 || !other.RetryOn.Has(streamgate.Class429) {
		t.Fatalf("gateway-wide policy %+v", other)
	}
	if big.Retries != 0 || big.BackoffBase != time.Second || big.FirstTokenTimeout != 5*time.Second ||
		big.RetryOn != streamgate.RetryOnOf(streamgate.ClassConnect) {
		t.Fatalf("model policy %+v", big)
	}
	// The table a running edge looks policies up in says the same.
	c.resolvePolicies()
	if c.RetryPolicy("small") != other || c.RetryPolicy("BIG") != big {
		t.Fatal("the resolved policy table disagrees with the computed policies")
	}
}

func TestConfigErrorsNameKeyAndFile(t *testing.T) {
	const node = "nodes: [{id: n, token: t}]\n"
	tests := []struct{ name, yaml, want string }{
		{"bad listen", "listen: nope\n", "listen"},
		{"node without token", "nodes: [{id: n}]\n", "nodes[0]"},
		{"bad hash", "nodes: [{id: n, token_sha256: zz}]\n", "nodes[0].token_sha256"},
		{"bad key hash", "auth: {keys: [{id: k, sha256: short}]}\n", "auth.keys[0].sha256"},
		{"bad filter", "streamgate: {filter: {enabled: true, rules: [{pattern: '(', action: block}]}}\n", "streamgate.filter"},
		{"unknown key", "lisen: x\n", "lisen"},
		{"wrong type", "limits: {max_body_bytes: lots}\n", "max_body_bytes"},
		{"bad retry class", "retry: {retry_on: [4xx]}\n", "retry.retry_on"},
		{"negative retries", "models: [{name: m, retry: {retries: -3}}]\n", "models[0].retry.retries"},
		{"negative attempts", "streamgate: {max_attempts: -3}\n", "streamgate.max_attempts"},
		{"no nodes", "listen: 127.0.0.1:1\n", "nodes: at least one node"},
		{"fallback cycle", node + "models: [{name: a, fallbacks: [b]}, {name: b, fallbacks: [c]}, {name: c, fallbacks: [a]}]\n", "fallback cycle: a → b → c → a"},
		{"self fallback", node + "models: [{name: a, fallbacks: [a]}]\n", "models[0].fallbacks[0]"},
		{"fallback nothing serves", "nodes: [{id: n, token: t, models: [a]}]\nmodels: [{name: a, fallbacks: [zz]}]\n", "models[0].fallbacks[0]: \"zz\" is not granted"},
		{"policy for no node", node + "providers: [{id: ghost/vllm, priority: 1}]\n", "providers[0].id: names node \"ghost\""},
		{"policy id shape", node + "providers: [{id: vllm}]\n", "providers[0].id: must be <node_id>/<provider id>"},
		{"missing TLS file", node + "tls: {cert_file: /nonexistent/cert.pem, key_file: /nonexistent/key.pem}\n", "tls.cert_file: cannot be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "gw.yaml")
			_ = os.WriteFile(p, []byte(tt.yaml), 0o600)
			_, err := LoadConfig(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err %v, want %q and the file", err, tt.want)
			}
		})
	}
}

func TestEnvOverride(t *testing.T) {
	t.Setenv("IOP_LIMITS__MAX_BODY_BYTES", "1024")
	t.Setenv("IOP_LISTEN", "127.0.0.1:9999")
	c, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxBodyBytes != 1024 || c.Listen != "127.0.0.1:9999" {
		t.Fatalf("%+v", c.Limits)
	}
}
