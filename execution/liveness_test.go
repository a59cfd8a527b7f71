package execution

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestValidateAndResolveStallTimeoutMS(t *testing.T) {
	maxSafe := maxSafeStallTimeoutMS
	tests := []struct {
		name    string
		ms      int64
		want    int64
		wantErr bool
	}{
		{name: "zero maps to the default", ms: 0, want: DefaultResponseStallTimeoutMS},
		{name: "one passes through", ms: 1, want: 1},
		{name: "default passes through", ms: 300000, want: 300000},
		{name: "maxSafe passes through", ms: maxSafe, want: maxSafe},
		{name: "negative one is rejected", ms: -1, wantErr: true},
		{name: "MinInt64 is rejected", ms: math.MinInt64, wantErr: true},
		{name: "maxSafe+1 overflows", ms: maxSafe + 1, wantErr: true},
		{name: "MaxInt64 overflows", ms: math.MaxInt64, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verr := ValidateStallTimeoutMS(tt.ms)
			if (verr != nil) != tt.wantErr {
				t.Fatalf("ValidateStallTimeoutMS(%d) = %v, wantErr %v", tt.ms, verr, tt.wantErr)
			}
			got, err := ResolveStallTimeoutMS(tt.ms)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidStallTimeout) || got != 0 {
					t.Fatalf("ResolveStallTimeoutMS(%d) = %d, %v; want 0, ErrInvalidStallTimeout", tt.ms, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveStallTimeoutMS(%d) = %d, %v; want %d, nil", tt.ms, got, err, tt.want)
			}
		})
	}
}

func TestDefaultResponseStallTimeoutMSIsDocumentedValue(t *testing.T) {
	if DefaultResponseStallTimeoutMS != 300000 {
		t.Fatalf("DefaultResponseStallTimeoutMS = %d, want 300000", DefaultResponseStallTimeoutMS)
	}
	d, err := StallTimeout(0)
	if err != nil || d != 300*time.Second {
		t.Fatalf("StallTimeout(0) = %v, %v; want 300s", d, err)
	}
}

func TestMaxSafeStallTimeoutConvertsWithoutOverflow(t *testing.T) {
	d, err := StallTimeout(maxSafeStallTimeoutMS)
	if err != nil || d <= 0 {
		t.Fatalf("StallTimeout(maxSafe) = %v, %v; want a positive duration", d, err)
	}
	if MaxSafeStallTimeoutMS() != maxSafeStallTimeoutMS {
		t.Fatal("MaxSafeStallTimeoutMS disagrees with maxSafeStallTimeoutMS")
	}
	// One more millisecond would wrap around.
	next := maxSafeStallTimeoutMS + 1 // a variable, so the overflow happens at run time
	if wrapped := time.Duration(next) * time.Millisecond; wrapped > 0 {
		t.Fatalf("maxSafe+1 ms = %v does not overflow; maxSafe is not the largest safe value", wrapped)
	}
}

func TestEffectiveResponseStallTimeoutMS(t *testing.T) {
	tests := []struct {
		name string
		conf NodeProviderConf
		want int64
	}{
		{"unset uses the default", NodeProviderConf{}, 300000},
		{"configured value", NodeProviderConf{ResponseStallTimeoutMS: 1500}, 1500},
		{"negative fails safe to the default", NodeProviderConf{ResponseStallTimeoutMS: -5}, 300000},
		{"overflow fails safe to the default", NodeProviderConf{ResponseStallTimeoutMS: math.MaxInt64}, 300000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.conf.EffectiveResponseStallTimeoutMS(); got != tt.want {
				t.Fatalf("EffectiveResponseStallTimeoutMS() = %d, want %d", got, tt.want)
			}
		})
	}
	d := ProviderDescriptor{ProviderID: "p", ResponseStallTimeoutMS: 42}
	if got := d.EffectiveResponseStallTimeoutMS(); got != 42 {
		t.Fatalf("descriptor effective timeout = %d, want 42", got)
	}
}

func TestClassifyRuntimeEvent(t *testing.T) {
	usage := &TokenUsage{PromptTokens: 1}
	tests := []struct {
		name string
		ev   RunEvent
		want Disposition
	}{
		{"start", RunEvent{Type: EventTypeStart}, DispositionStart},
		{"start with usage is still start", RunEvent{Type: EventTypeStart, Usage: usage}, DispositionStart},
		{"non-empty delta", RunEvent{Type: EventTypeDelta, Delta: "a"}, DispositionProgress},
		{"reasoning delta", RunEvent{Type: EventTypeDelta, Reasoning: "hmm"}, DispositionProgress},
		{"tool-call delta", RunEvent{Type: EventTypeDelta, ToolCalls: []ToolCallDelta{{Index: 0, Arguments: "{"}}}, DispositionProgress},
		{"non-empty message", RunEvent{Type: EventTypeMessage, Message: "hello"}, DispositionProgress},
		{"empty delta", RunEvent{Type: EventTypeDelta}, DispositionNone},
		{"empty message", RunEvent{Type: EventTypeMessage}, DispositionNone},
		{"non-terminal usage", RunEvent{Type: EventTypeUsage, Usage: usage}, DispositionProgress},
		{"delta carrying only usage", RunEvent{Type: EventTypeDelta, Usage: usage}, DispositionProgress},
		{"usage event without usage", RunEvent{Type: EventTypeUsage}, DispositionNone},
		{"complete", RunEvent{Type: EventTypeComplete}, DispositionTerminal},
		{"complete with usage is terminal (before usage check)", RunEvent{Type: EventTypeComplete, Usage: usage}, DispositionTerminal},
		{"error", RunEvent{Type: EventTypeError, Error: "x"}, DispositionTerminal},
		{"error with usage is terminal", RunEvent{Type: EventTypeError, Usage: usage}, DispositionTerminal},
		{"cancelled", RunEvent{Type: EventTypeCancelled}, DispositionTerminal},
		{"cancelled with delta text is terminal", RunEvent{Type: EventTypeCancelled, Delta: "x"}, DispositionTerminal},
		{"empty event", RunEvent{}, DispositionNone},
		{"unknown type", RunEvent{Type: "bogus", Delta: "x", Usage: usage}, DispositionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyRuntimeEvent(tt.ev); got != tt.want {
				t.Fatalf("ClassifyRuntimeEvent(%+v) = %s, want %s", tt.ev, got, tt.want)
			}
		})
	}
}

func TestClassifyProviderTunnelFrame(t *testing.T) {
	usage := &TokenUsage{TotalTokens: 3}
	tests := []struct {
		name string
		f    ProviderTunnelFrame
		want Disposition
	}{
		{"response_start with headers", ProviderTunnelFrame{Type: FrameTypeResponseStart, Status: 200, Header: map[string][]string{"Content-Type": {"text/event-stream"}}}, DispositionProgress},
		{"response_start without headers", ProviderTunnelFrame{Type: FrameTypeResponseStart, Status: 200}, DispositionProgress},
		{"non-empty body", ProviderTunnelFrame{Type: FrameTypeBody, Body: []byte("data: {}\n\n")}, DispositionProgress},
		{"empty body", ProviderTunnelFrame{Type: FrameTypeBody}, DispositionNone},
		{"end", ProviderTunnelFrame{Type: FrameTypeEnd}, DispositionTerminal},
		{"end with body is terminal (before payload check)", ProviderTunnelFrame{Type: FrameTypeEnd, Body: []byte("x")}, DispositionTerminal},
		{"error", ProviderTunnelFrame{Type: FrameTypeError, Error: "reset"}, DispositionTerminal},
		{"error with usage is terminal", ProviderTunnelFrame{Type: FrameTypeError, Usage: usage}, DispositionTerminal},
		{"usage", ProviderTunnelFrame{Type: FrameTypeUsage, Usage: usage}, DispositionProgress},
		{"usage frame without usage", ProviderTunnelFrame{Type: FrameTypeUsage}, DispositionNone},
		{"empty frame", ProviderTunnelFrame{}, DispositionNone},
		{"unknown frame", ProviderTunnelFrame{Type: "bogus", Body: []byte("x")}, DispositionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyProviderTunnelFrame(tt.f); got != tt.want {
				t.Fatalf("ClassifyProviderTunnelFrame(%+v) = %s, want %s", tt.f, got, tt.want)
			}
		})
	}
}

func FuzzStallTimeout(f *testing.F) {
	for _, ms := range []int64{0, 1, -1, 300000, maxSafeStallTimeoutMS, maxSafeStallTimeoutMS + 1, math.MaxInt64, math.MinInt64} {
		f.Add(ms)
	}
	f.Fuzz(func(t *testing.T, ms int64) {
		verr := ValidateStallTimeoutMS(ms)
		got, rerr := ResolveStallTimeoutMS(ms)
		if (verr == nil) != (rerr == nil) {
			t.Fatalf("Validate and Resolve disagree for %d: %v vs %v", ms, verr, rerr)
		}
		valid := ms >= 0 && ms <= maxSafeStallTimeoutMS
		if valid != (verr == nil) {
			t.Fatalf("ValidateStallTimeoutMS(%d) = %v, want valid=%v", ms, verr, valid)
		}
		if rerr != nil {
			if got != 0 {
				t.Fatalf("Resolve(%d) returned %d with an error", ms, got)
			}
			return
		}
		if got <= 0 || (ms != 0 && got != ms) || (ms == 0 && got != DefaultResponseStallTimeoutMS) {
			t.Fatalf("Resolve(%d) = %d", ms, got)
		}
		if d := time.Duration(got) * time.Millisecond; d <= 0 {
			t.Fatalf("resolved %d ms overflows to %v", got, d)
		}
		eff := NodeProviderConf{ResponseStallTimeoutMS: ms}.EffectiveResponseStallTimeoutMS()
		if eff != got {
			t.Fatalf("EffectiveResponseStallTimeoutMS(%d) = %d, want %d", ms, eff, got)
		}
	})
}
