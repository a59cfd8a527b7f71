package httpx

import (
	"context"
	"io"
)

// Pump is what the caller of a provider tells the pumps that read its
// upstream bodies (Tunnel, the normalized readers), through the context.
type Pump struct {
	// BeforeRead runs right before a pump blocks on its upstream again:
	// everything the last read produced has been emitted by then, so the
	// caller (the node's link) can send it as one message without
	// delaying any of it.
	BeforeRead func()
	// CopiesBodies says the frame emitter copies a body frame's bytes
	// before Emit returns (the node's link does, into a chunk the edge
	// can give back: eventstream.Chunk). Tunnel then emits its read
	// buffer itself instead of a copy of it: one copy per read, not two.
	CopiesBodies bool
	// Hand, when set, may take Tunnel's body reads and its end off the
	// calling goroutine altogether: it reports whether it took them, and
	// Tunnel then returns ErrHanded at once. The taker runs the steps
	// where what they produce is taken (the node's in-process link lends
	// them to the edge's receive, so a streamed chunk reaches the client
	// with no goroutine handoff). step reads once, emits what it read and
	// runs BeforeRead; it reports done at the body's end or a failed
	// read. At the loan's end the taker calls tail(complete) — which runs
	// the remaining steps when not complete, ends the tunnel (the end
	// frame or the read failure), closes the body and returns Tunnel's
	// result — or, when a step panicked, abort, which only closes the
	// body.
	Hand func(step func() (done bool), tail func(complete bool) error, abort func()) (taken bool)
}

// beforeRead runs p's read hook, if any.
func (p *Pump) beforeRead() {
	if p.BeforeRead != nil {
		p.BeforeRead()
	}
}

type pumpKey struct{}

// WithPump returns ctx carrying p for the pumps that run under it.
func WithPump(ctx context.Context, p *Pump) context.Context {
	return context.WithValue(ctx, pumpKey{}, p)
}

// WithReadHook returns ctx carrying hook for the pumps that run under it.
func WithReadHook(ctx context.Context, hook func()) context.Context {
	return WithPump(ctx, &Pump{BeforeRead: hook})
}

func pumpOf(ctx context.Context) *Pump {
	p, _ := ctx.Value(pumpKey{}).(*Pump)
	if p == nil {
		return &Pump{}
	}
	return p
}

// hooked wraps an upstream body so ctx's read hook, if any, runs before
// each read.
func hooked(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	hook := pumpOf(ctx).BeforeRead
	if hook == nil {
		return body
	}
	return hookedBody{ReadCloser: body, before: hook}
}

type hookedBody struct {
	io.ReadCloser
	before func()
}

func (b hookedBody) Read(p []byte) (int, error) {
	b.before()
	return b.ReadCloser.Read(p)
}
