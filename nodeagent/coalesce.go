package nodeagent

import (
	"slices"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// Coalescing: an attempt's items reach the edge in as few messages as
// the edge's handling allows, and never later than the edge could use
// them.
//
//   - Items that make no client output on their own wait for the next
//     item: a normalized start or usage event, a tunnel's response_start
//     (the edge holds a response head until its first bytes anyway) and
//     its usage frame (always followed by the end).
//   - An answer the edge buffers whole waits for its end: every event of
//     a non-streamed normalized request after its first content (sent at
//     once, so a first-token timeout sees it exactly), and the body of a
//     tunnelled response that is not an event stream or is an error.
//   - When the provider reads an upstream body, what one read produced
//     goes as one message: items wait until the provider is about to
//     read again (the read hook) — a delay of the time it takes to decode
//     that read, never of a read. A read here is one of the upstream
//     connection: the tunnel's pump does not run the hook while the
//     connection holds bytes it read ahead (httpx's aheadConn), so a
//     burst goes as one message, and the edge writes it to the client in
//     one flush (streamgate.Batched).
//   - A terminal sends everything held with it.
//
// Held items are bounded: by maxHeldBytes of text or body, and by
// maxHeldAge since the oldest held item, on a timer (outbound.added), so
// held progress reaches the edge within maxHeldAge even when nothing
// follows it. The node's watchdog counts an item as progress when it is
// emitted; the edge's stall backstop allows far more than maxHeldAge past
// a provider's stall timeout, so the edge never sees less progress than
// the watchdog did.
const (
	maxHeldBytes = 256 << 10
	maxHeldAge   = time.Second
)

// coalescer holds an attempt's outgoing items. It is used under the
// emitter's lock (one caller at a time).
type coalescer struct {
	events []*wire.RunEvent // held: in eventBuf up to four, on the heap beyond
	frames []*wire.ProviderTunnelFrame
	// The held items' first room, in the coalescer's own allocation: a
	// message of one item sends the item, not a slice, and a batch takes
	// a copy of its items, so an attempt's items never grow a slice
	// (the edge keeps a batch's slice; these arrays are reused).
	eventBuf [4]*wire.RunEvent
	frameBuf [4]*wire.ProviderTunnelFrame
	bytes    int
	oldest   time.Time // when the oldest held item was added

	whole  bool // the edge buffers the answer whole
	output bool // an item carrying client output went out
	reads  bool // the provider calls the read hook before each read
	held   bool // an item carrying client output is held
}

// heldEvent reports whether ev may wait for the next item.
func (c *coalescer) heldEvent(ev *wire.RunEvent) bool {
	switch execution.EventType(ev.GetType()) {
	case execution.EventTypeStart, execution.EventTypeUsage:
		return true
	case execution.EventTypeDelta, execution.EventTypeMessage:
		first := !c.output
		c.output = true
		if c.whole {
			return !first
		}
		return c.reads
	}
	return false
}

// heldFrame reports whether f may wait for the next item, and learns
// from a response_start whether the body is buffered whole at the edge.
func (c *coalescer) heldFrame(f *wire.ProviderTunnelFrame) bool {
	switch execution.FrameType(f.GetType()) {
	case execution.FrameTypeResponseStart:
		c.whole = f.GetStatus() >= 400 || !eventStream(f.GetHeaders())
		return true
	case execution.FrameTypeUsage:
		return true
	case execution.FrameTypeBody:
		return c.whole || c.reads
	}
	return false
}

// add holds the item just appended at now (carrying size bytes of client
// output) and reports whether the held items must go now.
func (c *coalescer) add(now time.Time, held bool, size int) bool {
	if len(c.events)+len(c.frames) == 1 {
		c.oldest = now
	}
	c.bytes += size
	c.held = c.held || size > 0
	return !held || c.bytes >= maxHeldBytes || now.Sub(c.oldest) >= maxHeldAge
}

// beforeRead reports whether the held items must go now that the
// provider is about to read its upstream again: output of a stream does;
// a head or usage waits for what follows it, and a whole answer for its
// end.
func (c *coalescer) beforeRead() bool {
	c.reads = true
	return c.held && !c.whole
}

// take returns the held items as one message (nil when none) and empties
// the coalescer.
func (c *coalescer) take() *wire.AttemptUp {
	var m *wire.AttemptUp
	switch {
	case len(c.events) == 1:
		m = &wire.AttemptUp{Msg: &wire.AttemptUp_Event{Event: c.events[0]}}
	case len(c.frames) == 1:
		m = &wire.AttemptUp{Msg: &wire.AttemptUp_Frame{Frame: c.frames[0]}}
	case len(c.events) > 1:
		m = &wire.AttemptUp{Msg: &wire.AttemptUp_Batch{Batch: &wire.UpBatch{Events: slices.Clone(c.events)}}}
	case len(c.frames) > 1:
		m = &wire.AttemptUp{Msg: &wire.AttemptUp_Batch{Batch: &wire.UpBatch{Frames: slices.Clone(c.frames)}}}
	}
	clear(c.eventBuf[:]) // the room is reused: it keeps nothing that went
	clear(c.frameBuf[:])
	c.events, c.frames, c.bytes, c.held = nil, nil, 0, false
	return m
}

// holdEvent appends ev to the held items.
func (c *coalescer) holdEvent(ev *wire.RunEvent) {
	if c.events == nil {
		c.events = c.eventBuf[:0]
	}
	c.events = append(c.events, ev)
}

// holdFrame appends f to the held items.
func (c *coalescer) holdFrame(f *wire.ProviderTunnelFrame) {
	if c.frames == nil {
		c.frames = c.frameBuf[:0]
	}
	c.frames = append(c.frames, f)
}

// eventStream reports whether response headers announce an event stream
// (SSE or NDJSON), which the edge forwards as it arrives.
func eventStream(hs []*wire.Header) bool {
	for _, h := range hs {
		if !strings.EqualFold(h.GetName(), "Content-Type") {
			continue
		}
		for _, v := range h.GetValues() {
			if _, stream := eventstream.FormatFor(v); stream {
				return true
			}
		}
	}
	return false
}
