package execution

import (
	"errors"
	"fmt"
	"testing"

	"maps"
)

func authoritative() map[string]string {
	return map[string]string{
		MetadataKeyFailureCode:            "response_stalled",
		MetadataKeyProviderHealth:         "available",
		MetadataKeyLivenessClassification: "request_stalled",
		MetadataKeyIdleDurationMS:         "300000",
		MetadataKeyRunID:                  "run-1",
		MetadataKeyAttemptID:              "att-1",
		MetadataKeyAttemptFence:           "confirmed",
		MetadataKeyAdapter:                "ollama",
		MetadataKeyTarget:                 "llama3.2",
		MetadataKeyHealthObservationSeq:   "7",
	}
}

func TestCloneStallMetadataKeepsOnlyAllowlistedKeys(t *testing.T) {
	caller := map[string]string{
		"recovery_eligible": "true",
		"authorization":     "Bearer sk-SENTINEL",
		"prompt":            "SENTINEL prompt",
		"raw":               `{"choices":[]}`,
	}
	got := CloneStallMetadata(caller, authoritative())
	if !maps.Equal(got, authoritative()) {
		t.Fatalf("CloneStallMetadata = %v, want exactly the authoritative allowlisted keys", got)
	}
	if len(StallMetadataKeys) != 10 {
		t.Fatalf("allowlist has %d keys, want the contract's 10", len(StallMetadataKeys))
	}
}

func TestCloneStallMetadataCallerCannotOverride(t *testing.T) {
	caller := authoritative()
	caller[MetadataKeyRunID] = "forged-run"
	caller[MetadataKeyProviderHealth] = "unavailable"
	caller[MetadataKeyAttemptFence] = "unconfirmed"
	caller[MetadataKeyFailureCode] = "response_stalled"
	got := CloneStallMetadata(caller, authoritative())
	if !maps.Equal(got, authoritative()) {
		t.Fatalf("caller overrode authoritative metadata: %v", got)
	}
	// A caller-only key survives only with a valid value, and failure_code is
	// forced even when the caller tried another one.
	got = CloneStallMetadata(map[string]string{MetadataKeyFailureCode: "upstream_error", MetadataKeyTarget: "m"}, nil)
	want := map[string]string{MetadataKeyFailureCode: "response_stalled", MetadataKeyTarget: "m"}
	if !maps.Equal(got, want) {
		t.Fatalf("CloneStallMetadata = %v, want %v", got, want)
	}
}

func TestCloneStallMetadataValidatesValues(t *testing.T) {
	bad := map[string]string{
		MetadataKeyProviderHealth:         "healthy",
		MetadataKeyLivenessClassification: "available",
		MetadataKeyAttemptFence:           "maybe",
		MetadataKeyIdleDurationMS:         "-1",
		MetadataKeyHealthObservationSeq:   "1e3",
		MetadataKeyRunID:                  "has space",
		MetadataKeyAdapter:                "",
		MetadataKeyTarget:                 string(make([]byte, 300)),
	}
	if got := CloneStallMetadata(bad, nil); got != nil {
		t.Fatalf("invalid values survived: %v", got)
	}
	if got := CloneStallMetadata(nil, nil); got != nil {
		t.Fatalf("CloneStallMetadata(nil, nil) = %v, want nil", got)
	}
}

func TestCloneStallMetadataIsDefensive(t *testing.T) {
	src := authoritative()
	got := CloneStallMetadata(nil, src)
	got[MetadataKeyRunID] = "mutated"
	if src[MetadataKeyRunID] != "run-1" {
		t.Fatal("clone shares storage with its source")
	}
}

func TestWireFailure(t *testing.T) {
	stalled := &ExecutionFailure{Code: FailureCodeResponseStalled, Message: "SENTINEL provider text", Retryable: true,
		Metadata: map[string]string{"recovery_eligible": "true", MetadataKeyRunID: "forged"}}
	tests := []struct {
		name string
		f    *ExecutionFailure
		want *ExecutionFailure
	}{
		{"nil failure stays absent", nil, nil},
		{"non-stalled failure stays absent", &ExecutionFailure{Code: FailureCodeUpstreamError, Message: "x", Metadata: authoritative()}, nil},
		{"stalled failure gets a clean clone", stalled, &ExecutionFailure{Code: FailureCodeResponseStalled, Message: StalledMessage, Retryable: true, Metadata: authoritative()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WireFailure(tt.f, authoritative())
			if (got == nil) != (tt.want == nil) {
				t.Fatalf("WireFailure = %+v, want %+v", got, tt.want)
			}
			if got == nil {
				return
			}
			if got.Code != tt.want.Code || got.Message != tt.want.Message || got.Retryable != tt.want.Retryable || !maps.Equal(got.Metadata, tt.want.Metadata) {
				t.Fatalf("WireFailure = %+v, want %+v", got, tt.want)
			}
		})
	}
	if stalled.Metadata[MetadataKeyRunID] != "forged" {
		t.Fatal("WireFailure mutated its input")
	}
}

func TestExecutionFailureIdentity(t *testing.T) {
	cause := errors.New("dial tcp: refused")
	f := &ExecutionFailure{Code: FailureCodeProviderNotFound, Message: "no provider", Err: cause}
	wrapped := fmt.Errorf("lookup: %w", f)
	if !errors.Is(wrapped, ErrProviderNotFound) {
		t.Fatal("errors.Is(ErrProviderNotFound) = false")
	}
	if errors.Is(wrapped, ErrProviderUnavailable) {
		t.Fatal("provider_not_found matched ErrProviderUnavailable")
	}
	if !errors.Is(wrapped, cause) {
		t.Fatal("cause not reachable through Unwrap")
	}
	var ef *ExecutionFailure
	if !errors.As(wrapped, &ef) || ef.Code != FailureCodeProviderNotFound {
		t.Fatal("errors.As did not find the ExecutionFailure")
	}
	if f.FenceConfirmed() {
		t.Fatal("a failure that is not Retryable reports a confirmed fence")
	}
	if !(&ExecutionFailure{Code: FailureCodeResponseStalled, Retryable: true}).FenceConfirmed() {
		t.Fatal("Retryable does not report a confirmed fence")
	}
	if FailureCodeResponseStalled != "response_stalled" {
		t.Fatal("FailureCodeResponseStalled changed")
	}
}
