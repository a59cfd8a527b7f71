package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "configs", "gateway.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || len(c.Nodes) != 1 || c.Limits.MaxBodyBytes != 16<<20 || c.StreamGate.MaxAttempts != 3 {
		t.Fatalf("loaded %+v", c)
	}
}

func TestConfigErrorsNameKeyAndFile(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"bad listen", "listen: nope\n", "listen"},
		{"node without token", "nodes: [{id: n}]\n", "nodes[0]"},
		{"bad hash", "nodes: [{id: n, token_sha256: zz}]\n", "nodes[0].token_sha256"},
		{"bad key hash", "auth: {keys: [{id: k, sha256: short}]}\n", "auth.keys[0].sha256"},
		{"bad filter", "streamgate: {filter: {enabled: true, rules: [{pattern: '(', action: block}]}}\n", "streamgate.filter"},
		{"unknown key", "lisen: x\n", "lisen"},
		{"wrong type", "limits: {max_body_bytes: lots}\n", "max_body_bytes"},
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
