package execution

import (
	"errors"
	"strconv"
)

// FailureCode is a stable, typed failure code.
type FailureCode string

// The failure codes. They are public surface: never rename one.
const (
	// FailureCodeResponseStalled: the provider made no progress within its
	// effective stall timeout and the node watchdog claimed the attempt.
	FailureCodeResponseStalled FailureCode = "response_stalled"
	// FailureCodeProviderNotFound: no provider is registered under the id.
	FailureCodeProviderNotFound FailureCode = "provider_not_found"
	// FailureCodeProviderUnavailable: the provider is registered but not
	// accepting work.
	FailureCodeProviderUnavailable FailureCode = "provider_unavailable"
	// FailureCodeInvalidRequest: the request failed validation before any
	// provider was invoked.
	FailureCodeInvalidRequest FailureCode = "invalid_request"
	// FailureCodeCommandNotAllowed: the command is outside the closed
	// provider-command allowlist.
	FailureCodeCommandNotAllowed FailureCode = "command_not_allowed"
	// FailureCodeUnsupported: the provider lacks the requested capability.
	FailureCodeUnsupported FailureCode = "unsupported"
	// FailureCodeUpstreamError: the provider's upstream failed.
	FailureCodeUpstreamError FailureCode = "upstream_error"
	// FailureCodeCancelled: the run was cancelled.
	FailureCodeCancelled FailureCode = "cancelled"
	// FailureCodeInternal: the host failed.
	FailureCodeInternal FailureCode = "internal"
)

// Sentinel errors for identity checks with errors.Is. An *ExecutionFailure
// matches the sentinel of its code.
var (
	ErrProviderNotFound    = errors.New("provider not found")
	ErrProviderUnavailable = errors.New("provider unavailable")
	ErrCommandNotAllowed   = errors.New("provider command not allowed")
	ErrUnsupported         = errors.New("unsupported by provider")
	ErrEmptyRunID          = errors.New("run_id is required")
)

var sentinelByCode = map[FailureCode]error{
	FailureCodeProviderNotFound:    ErrProviderNotFound,
	FailureCodeProviderUnavailable: ErrProviderUnavailable,
	FailureCodeCommandNotAllowed:   ErrCommandNotAllowed,
	FailureCodeUnsupported:         ErrUnsupported,
}

// ExecutionFailure is a typed failure carried by an error event or frame.
type ExecutionFailure struct {
	Code    FailureCode
	Message string
	// Retryable means only that the local provider ownership fence was
	// confirmed within the bounded close grace. It never means "retry".
	Retryable bool
	// Metadata is allowlisted evidence (see StallMetadataKeys): the
	// contract form of Stall, as it crosses a wire.
	Metadata map[string]string
	// Stall is the typed evidence of a response_stalled failure (nil for
	// any other): what the watchdog found and, on the edge, what the pool
	// validated. Metadata is built from it and parsed into it at the wire
	// boundary; everything else reads these fields.
	Stall *StallEvidence
	// Upstream describes the provider upstream's error answer, if that is
	// what failed.
	Upstream *UpstreamError
	// Err is the cause, if any; never sent over a wire.
	Err error
}

// UpstreamError is an error answer from a provider's upstream: its HTTP
// status and OpenAI-style error fields, so the edge can answer the client
// in its native error shape and decide whether another provider may help.
type UpstreamError struct {
	Status       int    // HTTP status; 0 when the upstream could not be reached
	Type         string // OpenAI error type, e.g. invalid_request_error
	Code         string // OpenAI error code, e.g. context_length_exceeded
	Param        string
	Message      string
	RetryAfterMS int64 // from retry-after-ms or retry-after, 0 if absent
}

// Error implements error.
func (e *UpstreamError) Error() string {
	if e.Status == 0 {
		return "upstream unreachable: " + e.Message
	}
	return "upstream status " + strconv.Itoa(e.Status) + ": " + e.Message
}

// UpstreamFailure returns an upstream_error failure describing ue.
func UpstreamFailure(ue *UpstreamError) *ExecutionFailure {
	return &ExecutionFailure{Code: FailureCodeUpstreamError, Message: ue.Error(), Upstream: ue, Err: ue}
}

// NewFailure returns a failure with code and message.
func NewFailure(code FailureCode, msg string) *ExecutionFailure {
	return &ExecutionFailure{Code: code, Message: msg}
}

// Error implements error.
func (f *ExecutionFailure) Error() string {
	if f.Message == "" {
		return string(f.Code)
	}
	return string(f.Code) + ": " + f.Message
}

// Unwrap returns the cause.
func (f *ExecutionFailure) Unwrap() error { return f.Err }

// Is reports whether target is the sentinel of f's code.
func (f *ExecutionFailure) Is(target error) bool {
	s, ok := sentinelByCode[f.Code]
	return ok && s == target
}

// FenceConfirmed reports whether the local ownership fence was confirmed,
// which is all Retryable ever means.
func (f *ExecutionFailure) FenceConfirmed() bool { return f != nil && f.Retryable }

// The allowlisted stall metadata keys. No other key ever crosses a wire.
const (
	MetadataKeyFailureCode            = "failure_code"
	MetadataKeyProviderHealth         = "provider_health"
	MetadataKeyLivenessClassification = "liveness_classification"
	MetadataKeyIdleDurationMS         = "idle_duration_ms"
	MetadataKeyRunID                  = "run_id"
	MetadataKeyAttemptID              = "attempt_id"
	MetadataKeyAttemptFence           = "attempt_fence"
	MetadataKeyAdapter                = "adapter"
	MetadataKeyTarget                 = "target"
	MetadataKeyHealthObservationSeq   = "health_observation_seq"
)

// StallMetadataKeys lists the allowlisted keys in their documented order.
var StallMetadataKeys = []string{
	MetadataKeyFailureCode, MetadataKeyProviderHealth, MetadataKeyLivenessClassification,
	MetadataKeyIdleDurationMS, MetadataKeyRunID, MetadataKeyAttemptID, MetadataKeyAttemptFence,
	MetadataKeyAdapter, MetadataKeyTarget, MetadataKeyHealthObservationSeq,
}

// maxMetadataValueLen bounds identifier values so no unbounded string crosses.
const maxMetadataValueLen = 256

// validMetadataValue reports whether v is acceptable for key: closed sets
// for the vocabulary keys, decimal numbers for the numeric keys, bounded
// printable identifiers for the rest.
func validMetadataValue(key, v string) bool {
	switch key {
	case MetadataKeyFailureCode:
		return v == string(FailureCodeResponseStalled)
	case MetadataKeyProviderHealth:
		return HealthStatus(v).Valid()
	case MetadataKeyLivenessClassification:
		return ProviderHealth(v).Valid()
	case MetadataKeyAttemptFence:
		return AttemptFence(v).Valid()
	case MetadataKeyIdleDurationMS, MetadataKeyHealthObservationSeq:
		_, err := strconv.ParseUint(v, 10, 64)
		return err == nil
	}
	return v != "" && len(v) <= maxMetadataValueLen && printableASCII(v)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// CloneStallMetadata returns a defensive clone holding only allowlisted keys
// with valid values. Values from authoritative overwrite those from caller,
// so caller metadata can never override what the host sets, and
// failure_code is always response_stalled. Unknown keys — raw payloads,
// credentials, recovery_eligible or anything else — are dropped. The result
// is nil when nothing survives.
func CloneStallMetadata(caller, authoritative map[string]string) map[string]string {
	out := make(map[string]string, len(StallMetadataKeys))
	for _, src := range []map[string]string{caller, authoritative} {
		for _, k := range StallMetadataKeys {
			if v, ok := src[k]; ok && validMetadataValue(k, v) {
				out[k] = v
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	out[MetadataKeyFailureCode] = string(FailureCodeResponseStalled)
	return out
}

// StalledMessage is the fixed message of a response_stalled failure on a
// wire: provider text never travels inside the typed failure.
const StalledMessage = "provider response stalled"

// WireFailure returns the failure to put on a wire for f, given the
// host's authoritative metadata for the attempt: a defensive clone with
// allowlisted metadata when f is a response_stalled failure, and nil for a
// nil or any other failure (whose legacy error string still travels).
func WireFailure(f *ExecutionFailure, authoritative map[string]string) *ExecutionFailure {
	if f == nil || f.Code != FailureCodeResponseStalled {
		return nil
	}
	return &ExecutionFailure{
		Code:      FailureCodeResponseStalled,
		Message:   StalledMessage,
		Retryable: f.Retryable,
		Metadata:  CloneStallMetadata(f.Metadata, authoritative),
	}
}
