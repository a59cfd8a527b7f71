// Package kubernetes holds iop's Kubernetes manifests; this test validates
// them offline.
package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

type object struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   map[string]any    `yaml:"metadata"`
	Spec       map[string]any    `yaml:"spec"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

func load(t *testing.T) []object {
	t.Helper()
	files, _ := filepath.Glob("*.yaml")
	var out []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata["name"] == nil {
				t.Fatalf("%s: object without apiVersion, kind or name: %+v", f, o)
			}
			out = append(out, o)
		}
	}
	return out
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// TestManifests checks the shape a cluster needs: three edge replicas whose
// selector matches their pods, a client Service and a headless node-link
// Service, probes on the admin port, and ConfigMaps that iop's own config
// loaders accept with the Secrets' values.
func TestManifests(t *testing.T) {
	objs := load(t)
	byName := map[string]object{}
	for _, o := range objs {
		byName[o.Kind+"/"+o.Metadata["name"].(string)] = o
		if o.Kind != "Namespace" && o.Metadata["namespace"] != "iop" {
			t.Errorf("%s/%s is not in namespace iop", o.Kind, o.Metadata["name"])
		}
	}
	edge, ok := byName["Deployment/iop-edge"]
	if !ok {
		t.Fatal("no edge Deployment")
	}
	if r, _ := edge.Spec["replicas"].(int); r != 3 {
		t.Fatalf("edge replicas %v, want 3", edge.Spec["replicas"])
	}
	for _, d := range []string{"Deployment/iop-edge", "Deployment/iop-node"} {
		o := byName[d]
		sel, _ := get(o.Spec, "selector", "matchLabels").(map[string]any)
		labels, _ := get(o.Spec, "template", "metadata", "labels").(map[string]any)
		if len(sel) == 0 {
			t.Fatalf("%s: no selector", d)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Fatalf("%s: selector %v does not match pod labels %v", d, sel, labels)
			}
		}
		containers, _ := get(o.Spec, "template", "spec", "containers").([]any)
		c, _ := containers[0].(map[string]any)
		if c["image"] == nil || c["args"] == nil {
			t.Fatalf("%s: container without image or args", d)
		}
	}
	c := get(edge.Spec, "template", "spec", "containers").([]any)[0].(map[string]any)
	if get(c, "readinessProbe", "httpGet", "path") != "/readyz" || get(c, "livenessProbe", "httpGet", "path") != "/healthz" {
		t.Fatal("edge probes must use /readyz and /healthz")
	}
	if byName["Service/iop-edge-nodes"].Spec["clusterIP"] != "None" {
		t.Fatal("the node-link Service must be headless (one address per edge)")
	}
	if _, ok := byName["Service/iop-edge"]; !ok {
		t.Fatal("no client Service")
	}
	dir := t.TempDir()
	t.Setenv("NODE_TOKEN_SHA256", byName["Secret/iop-edge-secrets"].StringData["node_token_sha256"])
	t.Setenv("ADMIN_TOKEN_SHA256", byName["Secret/iop-edge-secrets"].StringData["admin_token_sha256"])
	gw := filepath.Join(dir, "gateway.yaml")
	_ = os.WriteFile(gw, []byte(byName["ConfigMap/iop-edge-config"].Data["gateway.yaml"]), 0o600)
	gcfg, err := gateway.LoadConfig(gw)
	if err != nil {
		t.Fatal(err)
	}
	if gcfg.Admin.TokenSHA256 == "" || gcfg.AdminListen != "0.0.0.0:8081" {
		t.Fatal("the edge's admin listener is exposed without a token")
	}
	if gateway.HashToken(byName["Secret/iop-node-token"].StringData["token"]) != strings.ToLower(gcfg.Nodes[0].TokenSHA256) {
		t.Fatal("the edge's token hash does not match the node's token")
	}
	t.Setenv("IOP_TOKEN", byName["Secret/iop-node-token"].StringData["token"])
	nd := filepath.Join(dir, "node.yaml")
	_ = os.WriteFile(nd, []byte(byName["ConfigMap/iop-node-config"].Data["node.yaml"]), 0o600)
	ncfg, err := nodeagent.LoadConfig(nd)
	if err != nil {
		t.Fatal(err)
	}
	if ncfg.NodeID != gcfg.Nodes[0].ID || ncfg.Edges[0].Resolve != "dns" {
		t.Fatalf("node %q edges %+v", ncfg.NodeID, ncfg.Edges)
	}
}
