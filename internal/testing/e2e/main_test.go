package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the suite if a goroutine a cluster started outlives it:
// edges, nodes and their owned goroutines all stop with the cluster.
// Idle keep-alive connections of the test's own HTTP clients are not the
// product's, and are ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
