package execution

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsStdlibOnly enforces the contract's import rule: the execution
// package depends on the standard library only — no other package of this
// module, no generated wire types, no third-party module.
func TestImportsStdlibOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/iopgw/iop/execution" {
			continue
		}
		t.Errorf("execution imports non-stdlib package %s", dep)
	}
}
