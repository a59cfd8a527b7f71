package nodeagent

import (
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/clock"
	"github.com/iopgw/iop/wire"
)

// BenchmarkOutboundStreamChunk is the node's per-chunk cost of a streamed
// tunnel's outbound side: one body frame held, then sent by the
// provider's read hook (what each upstream read of a stream does).
func BenchmarkOutboundStreamChunk(b *testing.B) {
	sent := 0
	o := &outbound{clock: clock.Real, sendMsg: func(*wire.AttemptUp) error { sent++; return nil }}
	o.frame(&wire.ProviderTunnelFrame{Type: string(execution.FrameTypeResponseStart), Status: 200,
		Headers: []*wire.Header{{Name: "Content-Type", Values: []string{"text/event-stream"}}}})
	o.beforeRead()
	body := []byte("data: {}\n\n")
	b.ReportAllocs()
	for b.Loop() {
		o.frame(&wire.ProviderTunnelFrame{Type: string(execution.FrameTypeBody), Body: body})
		o.beforeRead()
	}
	if sent < b.N {
		b.Fatalf("%d messages for %d chunks: a chunk was held across a read", sent, b.N)
	}
}
