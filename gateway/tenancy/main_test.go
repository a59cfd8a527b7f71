package tenancy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started (a
// settlement to the shared store) is still running at the end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
