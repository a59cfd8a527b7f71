package execution

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultResponseStallTimeoutMS is the documented default stall timeout: a
// provider that makes no progress for 300 s is stalled.
const DefaultResponseStallTimeoutMS int64 = 300000

// maxSafeStallTimeoutMS is the largest millisecond value that converts to a
// time.Duration without overflow.
const maxSafeStallTimeoutMS int64 = math.MaxInt64 / int64(time.Millisecond)

// MaxSafeStallTimeoutMS reports the largest accepted stall timeout in
// milliseconds (about 292 years).
func MaxSafeStallTimeoutMS() int64 { return maxSafeStallTimeoutMS }

// ErrInvalidStallTimeout reports a negative or overflowing stall timeout.
var ErrInvalidStallTimeout = errors.New("invalid response stall timeout")

// ValidateStallTimeoutMS rejects negative values and values exceeding
// maxSafeStallTimeoutMS. Zero is allowed: it means "use the default".
func ValidateStallTimeoutMS(ms int64) error {
	switch {
	case ms < 0:
		return fmt.Errorf("%w: %d ms is negative", ErrInvalidStallTimeout, ms)
	case ms > maxSafeStallTimeoutMS:
		return fmt.Errorf("%w: %d ms exceeds %d ms", ErrInvalidStallTimeout, ms, maxSafeStallTimeoutMS)
	}
	return nil
}

// ResolveStallTimeoutMS validates ms, then maps zero to
// DefaultResponseStallTimeoutMS. Safe positive values pass through;
// negative or overflow values return an error.
func ResolveStallTimeoutMS(ms int64) (int64, error) {
	if err := ValidateStallTimeoutMS(ms); err != nil {
		return 0, err
	}
	if ms == 0 {
		return DefaultResponseStallTimeoutMS, nil
	}
	return ms, nil
}

// StallTimeout converts a resolved millisecond timeout to a duration.
func StallTimeout(ms int64) (time.Duration, error) {
	resolved, err := ResolveStallTimeoutMS(ms)
	if err != nil {
		return 0, err
	}
	return time.Duration(resolved) * time.Millisecond, nil
}

// NodeProviderConf is the stall-relevant part of a node provider's
// configuration.
type NodeProviderConf struct {
	ProviderID string
	// ResponseStallTimeoutMS is the configured stall timeout. Zero means
	// DefaultResponseStallTimeoutMS.
	ResponseStallTimeoutMS int64
}

// EffectiveResponseStallTimeoutMS returns the effective timeout for a
// provider candidate: the configured value resolved by
// ResolveStallTimeoutMS. Configuration loaders validate the value first; an
// invalid value that slipped through fails safe to the default rather than
// to "never".
func (c NodeProviderConf) EffectiveResponseStallTimeoutMS() int64 {
	ms, err := ResolveStallTimeoutMS(c.ResponseStallTimeoutMS)
	if err != nil {
		return DefaultResponseStallTimeoutMS
	}
	return ms
}

// Disposition is what an event or frame means to a liveness watchdog.
type Disposition string

// The dispositions. Only DispositionProgress resets a stall watchdog.
const (
	DispositionNone     Disposition = "none"
	DispositionStart    Disposition = "start"
	DispositionProgress Disposition = "progress"
	DispositionTerminal Disposition = "terminal"
)

// ClassifyRuntimeEvent returns start for EventTypeStart, progress for a
// non-empty delta or message or a non-terminal usage, terminal for
// complete/error/cancelled (checked before usage), and none for empty or
// unknown events.
func ClassifyRuntimeEvent(ev RunEvent) Disposition {
	switch ev.Type {
	case EventTypeStart:
		return DispositionStart
	case EventTypeComplete, EventTypeError, EventTypeCancelled:
		return DispositionTerminal
	case EventTypeDelta, EventTypeMessage:
		if ev.HasContent() || ev.Usage != nil {
			return DispositionProgress
		}
	case EventTypeUsage:
		if ev.Usage != nil {
			return DispositionProgress
		}
	}
	return DispositionNone
}

// ClassifyProviderTunnelFrame returns progress for response_start (with or
// without headers) and a non-empty body, terminal for end/error (checked
// before any payload), progress for usage, and none for empty or unknown
// frames.
func ClassifyProviderTunnelFrame(f ProviderTunnelFrame) Disposition {
	switch f.Type {
	case FrameTypeEnd, FrameTypeError:
		return DispositionTerminal
	case FrameTypeResponseStart:
		return DispositionProgress
	case FrameTypeBody:
		if len(f.Body) > 0 {
			return DispositionProgress
		}
	case FrameTypeUsage:
		if f.Usage != nil {
			return DispositionProgress
		}
	}
	return DispositionNone
}

// ExecutionPath names how an attempt runs: the normalized path (the node
// runs the provider and events are rendered at the edge) or the provider
// tunnel (upstream bytes carried through).
type ExecutionPath string

// The ExecutionPath values.
const (
	ExecutionPathNormalized     ExecutionPath = "normalized"
	ExecutionPathProviderTunnel ExecutionPath = "provider_tunnel"
	ExecutionPathUnknown        ExecutionPath = "unknown"
)
