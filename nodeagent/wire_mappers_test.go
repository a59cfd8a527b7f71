package nodeagent

import (
	"maps"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

func TestRunEventToProtoFailureAllowlist(t *testing.T) {
	id := attemptIdentity{RunID: "run-9", AttemptID: "att-9", Adapter: "ollama", Target: "llama3.2"}
	forged := map[string]string{
		"recovery_eligible": "true", "prompt": "SENTINEL-PROMPT", "authorization": "Bearer SENTINEL-KEY",
		execution.MetadataKeyRunID: "forged", execution.MetadataKeyAdapter: "forged", execution.MetadataKeyTarget: "forged",
		execution.MetadataKeyAttemptID: "forged", execution.MetadataKeyProviderHealth: "available",
		execution.MetadataKeyLivenessClassification: "request_stalled", execution.MetadataKeyAttemptFence: "confirmed",
		execution.MetadataKeyIdleDurationMS: "300000", execution.MetadataKeyHealthObservationSeq: "3",
	}
	ev := execution.RunEvent{Type: execution.EventTypeError, Error: "response stalled",
		Failure: &execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Message: "SENTINEL-RAW", Retryable: true, Metadata: forged}}
	m := runEventToProto(ev, id)
	want := map[string]string{
		"failure_code": "response_stalled", "run_id": "run-9", "attempt_id": "att-9", "adapter": "ollama", "target": "llama3.2",
		"provider_health": "available", "liveness_classification": "request_stalled", "attempt_fence": "confirmed",
		"idle_duration_ms": "300000", "health_observation_seq": "3",
	}
	if !maps.Equal(m.GetFailure().GetMetadata(), want) {
		t.Fatalf("metadata %v\nwant %v", m.GetFailure().GetMetadata(), want)
	}
	if m.GetError() != "response stalled" || !m.GetFailure().GetRetryable() || m.GetDetail() != nil {
		t.Fatalf("event %v", m)
	}
	if s := m.String(); strings.Contains(s, "SENTINEL") {
		t.Fatalf("sentinel crossed the wire: %s", s)
	}
	if forged[execution.MetadataKeyRunID] != "forged" {
		t.Fatal("mapper mutated the caller's metadata")
	}
}

func TestMappersLeaveFailureAbsentUnlessStalled(t *testing.T) {
	id := attemptIdentity{RunID: "r", AttemptID: "a", Adapter: "sim", Target: "m"}
	cases := []*execution.ExecutionFailure{
		nil,
		execution.NewFailure(execution.FailureCodeProviderNotFound, "no provider"),
		execution.UpstreamFailure(&execution.UpstreamError{Status: 503, Code: "server_is_overloaded", Message: "busy"}),
	}
	for _, f := range cases {
		ev := runEventToProto(execution.RunEvent{Type: execution.EventTypeError, Error: "legacy text", Failure: f}, id)
		fr := tunnelFrameToProto(execution.ProviderTunnelFrame{Type: execution.FrameTypeError, Error: "legacy text", Failure: f}, id)
		if ev.GetFailure() != nil || fr.GetFailure() != nil {
			t.Fatalf("failure present for %v", f)
		}
		if ev.GetError() != "legacy text" || fr.GetError() != "legacy text" {
			t.Fatal("legacy error string lost")
		}
		if f != nil && (ev.GetDetail().GetFailureCode() != string(f.Code) || fr.GetDetail().GetFailureCode() != string(f.Code)) {
			t.Fatalf("detail %v", ev.GetDetail())
		}
	}
	up := runEventToProto(execution.RunEvent{Type: execution.EventTypeError, Failure: cases[2]}, id).GetDetail()
	if !up.GetUpstream() || up.GetUpstreamStatus() != 503 || up.GetCode() != "server_is_overloaded" {
		t.Fatalf("upstream detail %v", up)
	}
	st := tunnelFrameToProto(execution.ProviderTunnelFrame{Type: execution.FrameTypeError,
		Failure: &execution.ExecutionFailure{Code: execution.FailureCodeResponseStalled, Metadata: map[string]string{"recovery_eligible": "true"}}}, id)
	if st.GetFailure() == nil || st.GetFailure().GetMetadata()["recovery_eligible"] != "" || st.GetFailure().GetMetadata()["run_id"] != "r" {
		t.Fatalf("tunnel stalled failure %v", st.GetFailure())
	}
}

func TestRunRequestFromProtoNormalizesTimeout(t *testing.T) {
	tests := []struct {
		ms      int64
		want    int64
		wantErr bool
	}{
		{0, 300000, false}, {1, 1, false}, {1500, 1500, false}, {-1, 0, true}, {9223372036855, 0, true},
	}
	for _, tt := range tests {
		req, err := runRequestFromProto(&wire.RunRequest{RunId: "r", ResponseStallTimeoutMs: tt.ms})
		if (err != nil) != tt.wantErr || (err == nil && req.ResponseStallTimeoutMS != tt.want) {
			t.Errorf("ms %d: %+v %v", tt.ms, req, err)
		}
		treq, err := tunnelRequestFromProto(&wire.ProviderTunnelRequest{RunId: "r", ResponseStallTimeoutMs: tt.ms})
		if (err != nil) != tt.wantErr || (err == nil && treq.ResponseStallTimeoutMS != tt.want) {
			t.Errorf("tunnel ms %d: %+v %v", tt.ms, treq, err)
		}
	}
	if _, err := runRequestFromProto(&wire.RunRequest{}); err == nil {
		t.Fatal("empty run_id accepted")
	}
}
