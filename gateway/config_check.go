package gateway

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/iopgw/iop/gateway/fleet"
)

// checkReferences finds the mistakes that are only visible across keys:
// fallback cycles, fallbacks nothing may serve,
// provider policies naming no provider, TLS files that cannot be read.
func (c *Config) checkReferences(bad badFunc) {
	c.checkFallbacks(bad)
	for i, p := range c.Providers {
		key := fmt.Sprintf("providers[%d].id", i)
		node, prov, ok := strings.Cut(p.ID, "/")
		n := c.node(node)
		switch {
		case !ok || node == "" || prov == "":
			bad(key, "must be <node_id>/<provider id>, e.g. node-1/vllm")
		case n == nil:
			bad(key, "names node %q, which is not in nodes[]", node)
		case len(n.Providers) > 0 && !slices.Contains(n.Providers, prov):
			bad(key, "names provider %q, which node %q is not granted (nodes[].providers)", prov, node)
		}
	}
	for key, path := range map[string]string{"tls.cert_file": c.TLS.CertFile, "tls.key_file": c.TLS.KeyFile,
		"node_tls.cert_file": c.NodeTLS.CertFile, "node_tls.key_file": c.NodeTLS.KeyFile, "node_tls.client_ca_file": c.NodeTLS.ClientCAFile} {
		if path == "" {
			continue
		}
		if f, err := os.Open(path); err != nil {
			bad(key, "cannot be read: %v", err)
		} else {
			f.Close()
		}
	}
}

// checkFallbacks rejects cycles and fallbacks no node may serve (when
// every node's grant lists its models).
func (c *Config) checkFallbacks(bad badFunc) {
	grantsKnown := len(c.Nodes) > 0
	granted := map[string]bool{}
	for _, n := range c.Nodes {
		if len(n.Models) == 0 {
			grantsKnown = false
		}
		for _, m := range n.Models {
			granted[strings.ToLower(m)] = true
		}
	}
	for i, m := range c.Models {
		for j, f := range m.Fallbacks {
			key := fmt.Sprintf("models[%d].fallbacks[%d]", i, j)
			switch {
			case strings.EqualFold(f, m.Name):
				bad(key, "%q falls back to itself", f)
			case grantsKnown && !granted[strings.ToLower(f)]:
				bad(key, "%q is not granted to any node (nodes[].models), so nothing can serve it", f)
			}
		}
		if cycle := c.fallbackCycle(m.Name, nil); len(cycle) > 1 {
			bad(fmt.Sprintf("models[%d].fallbacks", i), "fallback cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

// fallbackCycle returns a path from model back to itself through the
// fallback chains, or nil.
func (c *Config) fallbackCycle(model string, path []string) []string {
	for _, p := range path {
		if strings.EqualFold(p, model) {
			return append(path, model)
		}
	}
	path = append(path, model)
	for _, f := range c.model(model).Fallbacks {
		if strings.EqualFold(f, model) {
			continue // reported as a self-fallback
		}
		if cyc := c.fallbackCycle(f, path); cyc != nil && strings.EqualFold(cyc[0], cyc[len(cyc)-1]) && strings.EqualFold(cyc[0], path[0]) {
			return cyc
		}
	}
	return nil
}

// node returns the node config with id, or nil.
func (c *Config) node(id string) *fleet.NodeConfig {
	for i := range c.Nodes {
		if c.Nodes[i].ID == id {
			return &c.Nodes[i]
		}
	}
	if len(c.Node) > 0 && id == c.BundledNodeID() {
		return &fleet.NodeConfig{ID: id} // the node: section's, granted everything
	}
	return nil
}

// BundledNodeID is the id of the node: section's node: its node_id, else
// "local".
func (c *Config) BundledNodeID() string {
	if id, ok := c.Node["node_id"].(string); ok && id != "" {
		return id
	}
	return "local"
}
