package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the suite if a goroutine a cluster started outlives it:
// edges, nodes and their owned goroutines all stop with the cluster.
// Idle keep-alive connections of the test's own HTTP clients are not the
// product's, and are ignored; so is a toxic's pipe of the fault proxy
// (toxiproxy, test support) stopped mid-stream, which toxiproxy leaves
// blocked on its channel.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}
