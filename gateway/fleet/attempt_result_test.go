package fleet

import (
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/gateway/pool"
)

func TestAttemptResultClassification(t *testing.T) {
	up := func(status int) *execution.ExecutionFailure {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: status, Message: "x"})
	}
	for _, tc := range []struct {
		name string
		got  pool.AttemptResult
		want pool.AttemptResult
	}{
		{"complete", eventResult(execution.RunEvent{Type: execution.EventTypeComplete}), pool.ResultSuccess},
		{"503", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: up(503)}), pool.ResultServerFailure},
		{"unreachable", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: up(0)}), pool.ResultServerFailure},
		{"cut after 200", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: up(200)}), pool.ResultServerFailure},
		{"429", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: up(429)}), pool.ResultNeutral},
		{"400", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: up(400)}), pool.ResultNeutral},
		{"stall", eventResult(execution.RunEvent{Type: execution.EventTypeError, Failure: execution.NewFailure(execution.FailureCodeResponseStalled, "s")}), pool.ResultNeutral},
		{"cancelled", eventResult(execution.RunEvent{Type: execution.EventTypeCancelled}), pool.ResultNeutral},
		{"tunnel 200 end", frameResult(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}, 200), pool.ResultSuccess},
		{"tunnel 502 end", frameResult(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}, 502), pool.ResultServerFailure},
		{"tunnel 429 end", frameResult(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd}, 429), pool.ResultNeutral},
		{"tunnel cut", frameResult(execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Failure: up(200)}, 200), pool.ResultServerFailure},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
