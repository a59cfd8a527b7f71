// Package layers holds the architecture's import rule, checked over every
// package of the module.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/iopgw/iop/"

// allowed lists, for each layer (a package path prefix, longest match
// wins), the module packages it may import. The direction is execution →
// codec/wire → nodeagent/streamgate → gateway → cmd; helpers under
// internal are shared; test support under internal/testing is never
// imported by product code.
var allowed = map[string][]string{
	"execution":            {},
	"codec/jsonstrict":     {},
	"codec":                {"execution", "codec", "internal/ids"},
	"wire":                 {"execution"},
	"surface":              {"execution", "codec", "wire", "internal/ids"},
	"internal/httphdr":     {},
	"internal/konfig":      {},
	"internal/syncx":       {},
	"internal/clock":       {},
	"internal/tracing":     {},
	"internal/ids":         {},
	"internal/slogx":       {"internal/clock"},
	"internal/gcheadroom":  {},
	"internal/inproc":      {},
	"internal/bodyio":      {},
	"openapi":              {},
	"nodeagent":            {"execution", "codec", "wire", "internal/httphdr", "internal/konfig", "internal/syncx", "internal/tracing", "internal/clock", "internal/gcheadroom", "nodeagent"},
	"streamgate":           {"execution", "codec", "surface", "internal/httphdr", "internal/syncx", "internal/clock"},
	"gateway":              {"execution", "codec", "wire", "internal/httphdr", "internal/konfig", "internal/syncx", "internal/tracing", "openapi", "streamgate", "surface", "internal/clock", "gateway/tenancy", "gateway/pool", "gateway/fleet", "internal/ids", "internal/slogx", "internal/gcheadroom", "internal/bodyio", "gateway/stored", "gateway/ollamameta"},
	"gateway/ollamameta":   {"codec", "internal/ids"},
	"gateway/fleet":        {"execution", "codec", "wire", "streamgate", "gateway/pool", "internal/ids", "internal/slogx", "internal/syncx", "internal/tracing", "internal/clock", "internal/inproc"},
	"gateway/pool":         {"execution", "wire", "streamgate"},
	"gateway/tenancy":      {"execution", "codec", "internal/ids"},
	"gateway/stored":       {"execution", "codec", "streamgate", "surface", "internal/httphdr", "internal/ids"},
	"cmd":                  {"gateway", "nodeagent", "internal/konfig", "internal/clock", "internal/slogx", "internal/gcheadroom"},
	"internal/testing":     {"*"},
	"conformance":          {"*"},
	"examples":             {"*"},
	"deploy":               {"*"},
	"internal/testing/e2e": {"*"},
}

// layerOf is the longest rule prefix of pkg.
func layerOf(pkg string) string {
	best := ""
	for prefix := range allowed {
		if (pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && len(prefix) > len(best) {
			best = prefix
		}
	}
	return best
}

func permits(rules []string, imp string) bool {
	for _, r := range rules {
		if r == "*" || imp == r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}

// TestImportRule: every package's non-test imports of this module follow
// its layer's rule, and no product package imports test support.
func TestImportRule(t *testing.T) {
	// Standard output only: the go command reports module downloads on
	// standard error, and a "go: downloading" line is no package.
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", module+"...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, imports, _ := strings.Cut(line, ":")
		pkg := strings.TrimPrefix(name, module)
		t.Run(pkg, func(t *testing.T) {
			layer := layerOf(pkg)
			if layer == "" {
				t.Fatalf("package %s has no import rule: add its layer to allowed", pkg)
			}
			for _, imp := range strings.Fields(imports) {
				if !strings.HasPrefix(imp, module) {
					continue
				}
				imp = strings.TrimPrefix(imp, module)
				if !permits(allowed[layer], imp) {
					t.Errorf("%s (layer %s) imports %s", pkg, layer, imp)
				}
			}
		})
	}
}

// TestRulesHold: the rule table itself refuses the wrong direction.
func TestRulesHold(t *testing.T) {
	for _, tc := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"streamgate", "gateway", false},
		{"surface", "streamgate", false},
		{"streamgate", "surface", true},
		{"streamgate", "nodeagent", false},
		{"gateway", "nodeagent", false},
		{"execution", "codec/openai", false},
		{"wire", "codec/openai", false},
		{"gateway", "internal/testing/wall", false},
		{"nodeagent/providers/openai", "codec/eventstream", true},
		{"cmd/iop", "gateway", true},
		{"gateway/tenancy", "gateway", false},
		{"gateway/tenancy", "streamgate", false},
		{"gateway", "gateway/tenancy", true},
		{"gateway/pool", "gateway", false},
		{"gateway/pool", "gateway/tenancy", false},
		{"gateway", "gateway/pool", true},
		{"gateway/fleet", "gateway", false},
		{"gateway/fleet", "gateway/pool", true},
		{"gateway/pool", "gateway/fleet", false},
	} {
		if got := permits(allowed[layerOf(tc.pkg)], tc.imp); got != tc.ok {
			t.Errorf("%s importing %s: allowed=%v, want %v", tc.pkg, tc.imp, got, tc.ok)
		}
	}
}
