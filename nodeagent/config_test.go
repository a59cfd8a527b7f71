package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleConfigLoads(t *testing.T) {
	t.Setenv("IOP_TOKEN", "from-env")
	c, err := LoadConfig(filepath.Join("..", "configs", "node.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "from-env" || len(c.Providers) == 0 || len(c.Edges) == 0 {
		t.Fatalf("loaded %+v", c)
	}
	for _, p := range c.Providers {
		if p.Capacity <= 0 || p.Target == "" || p.InstanceKey == "" || p.Path == "" {
			t.Fatalf("provider defaults not applied: %+v", p)
		}
	}
}

func TestConfigErrorsNameKeyAndFile(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"missing node_id", "token: x\nedges: [{address: a:1}]\nproviders: [{id: s, adapter: sim, models: [m]}]\n", "node_id: required"},
		{"bad adapter", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: s, adapter: llama, models: [m]}]\n", "providers[0].adapter"},
		{"bad timeout", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: s, adapter: sim, models: [m], response_stall_timeout_ms: -5}]\n", "providers[0].response_stall_timeout_ms"},
		{"missing base_url", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: o, adapter: openai, models: [m]}]\n", "providers[0].base_url"},
		{"duplicate id", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: s, adapter: sim, models: [m]}, {id: s, adapter: sim, models: [m]}]\n", "providers[1].id"},
		{"unknown key", "node_id: n\ntokn: x\n", "tokn"},
		{"no edges", "node_id: n\ntoken: x\nproviders: [{id: s, adapter: sim, models: [m]}]\n", "edges"},
		{"unset api_key_env", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: o, adapter: openai, base_url: 'http://h:1/v1', models: [m], api_key_env: IOP_TEST_SURELY_UNSET_KEY}]\n",
			"providers[0].api_key_env: names the environment variable IOP_TEST_SURELY_UNSET_KEY, which is not set"},
		{"prefill on a tunnel provider", "node_id: n\ntoken: x\nedges: [{address: a:1}]\nproviders: [{id: o, adapter: openai, path: tunnel, prefill: true, base_url: 'http://h:1/v1', models: [m]}]\n",
			"providers[0].prefill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "node.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want %q and the file name", err, tt.want)
			}
		})
	}
}
