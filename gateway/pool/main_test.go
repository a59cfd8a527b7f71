package pool

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is
// still running at the end: every goroutine has an owner that stops and
// waits for it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
