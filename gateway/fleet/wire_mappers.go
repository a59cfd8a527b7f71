package fleet

import (
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/wire"
)

// runRequestToProto is r for the leased provider: its local id, its
// target and its stall timeout.
func runRequestToProto(r *execution.RunRequest, l *pool.Lease, attemptID string) *wire.RunRequest {
	m := wire.RunRequestToProto(r)
	m.AttemptId, m.ProviderId, m.Model, m.ResponseStallTimeoutMs = attemptID, l.LocalProviderID, l.Target, l.StallTimeout.Milliseconds()
	return m
}
