package inproc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is one call: the client's end (clientStream) and the handler's
// (serverStream) are views of it.
type stream struct {
	method string
	copy   CopyFunc

	ctx     context.Context // the caller's
	cctx    context.Context // the client's, ended when the client sees the end
	ccancel context.CancelCauseFunc
	sctx    context.Context // the handler's
	scancel context.CancelFunc
	stop    func() bool // unregisters the caller's cancellation from the handler's context

	up     chan any      // client → handler, one message in flight
	down   chan any      // handler → client, one message in flight
	closed chan struct{} // the client half-closed
	done   chan struct{} // the handler returned; err is set
	err    error

	closeOnce sync.Once
	detached  atomic.Bool // the handler called Detach: its return does not end the stream
	endOnce   sync.Once   // the stream's end: its handler's return, or the detached handler's end
	mu        sync.Mutex  // guards header, trailer, headerSent
	header    metadata.MD
	trailer   metadata.MD
	sentHead  chan struct{} // closed when the header is sent (first message, SendHeader or the end)
	headOnce  sync.Once
	lend      lending // a client's read lent to the handler (Hand)
}

func newStream(ctx context.Context, c *Channel, method string) *stream {
	s := &stream{method: method, copy: c.copy, ctx: ctx,
		up: make(chan any, 1), down: make(chan any, 1), closed: make(chan struct{}), done: make(chan struct{}),
		sentHead: make(chan struct{}), lend: lending{offered: make(chan struct{}, 1)}}
	s.cctx, s.ccancel = context.WithCancelCause(ctx)
	s.sctx, s.scancel = c.serverContext(ctx, (*transportStream)(s))
	// The handler's context follows the caller's, as cctx does: cctx is
	// cancelled on its own only once the client has seen the end, after
	// the handler's context ended (end). Registered on ctx rather than
	// on cctx, it costs no set of children held by cctx.
	s.stop = context.AfterFunc(ctx, s.scancel)
	return s
}

// serve runs the handler (through the interceptor) and ends the stream
// with its status — unless the handler detached the stream and returned
// nil: then the end it was given ends it.
func (s *stream) serve(m method, intercept grpc.StreamServerInterceptor) {
	ss := (*serverStream)(s)
	var err error
	if intercept != nil {
		err = intercept(m.impl, ss, m.info, m.handler)
	} else {
		err = m.handler(m.impl, ss)
	}
	if err == nil && s.detached.Load() {
		return
	}
	s.end(err)
}

// end ends the stream with the status of err, once: the client receives
// what was sent before it, then io.EOF or the status.
func (s *stream) end(err error) {
	s.endOnce.Do(func() {
		s.err = statusOf(err)
		s.sendHead()
		close(s.done)
		s.stop()
		s.scancel()
	})
}

// Detach lets the handler whose context is ctx return without ending its
// stream, and returns the stream's end (ok is false for a context that
// is not an in-process handler's). A handler that only waits between the
// stream's messages can return after arranging to go on when there is
// something to do (context.AfterFunc on what it waits for): the stream
// then holds no goroutine while it waits. end(err) ends the stream as the
// handler's returning err would; the first call counts. A detached
// handler that returns an error ends its stream with it at once.
func Detach(ctx context.Context) (end func(error), ok bool) {
	t, ok := grpc.ServerTransportStreamFromContext(ctx).(*transportStream)
	if !ok {
		return nil, false
	}
	s := (*stream)(t)
	s.detached.Store(true)
	return s.end, true
}

// Pending returns, for the handler whose context is ctx, a report of
// whether a message of the client's is waiting: a receive then takes it
// without blocking (ok is false for a context that is not an in-process
// handler's). A detached handler can go on at once, on the goroutine it
// is on, when what it waits for has come.
func Pending(ctx context.Context) (pending func() bool, ok bool) {
	t, ok := grpc.ServerTransportStreamFromContext(ctx).(*transportStream)
	if !ok {
		return nil, false
	}
	s := (*stream)(t)
	return func() bool { return len(s.up) > 0 }, true
}

func (s *stream) sendHead() { s.headOnce.Do(func() { close(s.sentHead) }) }

// ctxErr is the status for an ended context.
func ctxErr(ctx context.Context) error { return status.FromContextError(ctx.Err()).Err() }

// clientStream is the caller's end.
type clientStream stream

func (c *clientStream) Context() context.Context { return c.cctx }

// AfterEnd arranges for f to run, on a goroutine of its own, once the
// stream has ended: the handler returned or the client's context ended.
// A network client learns of the handler's end only by reading; an
// in-process one can be told, and need not keep a reader waiting for it.
// stop cancels the call unless f already started.
func (c *clientStream) AfterEnd(f func()) (stop func() bool) { return context.AfterFunc(c.sctx, f) }

// Header waits for the handler's header (sent with its first message,
// by SendHeader, or at its end).
func (c *clientStream) Header() (metadata.MD, error) {
	select {
	case <-c.sentHead:
	case <-c.cctx.Done():
		select {
		case <-c.sentHead: // cctx also ends once the client saw the end
		default:
			return nil, ctxErr(c.cctx)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header.Copy(), nil
}

// Trailer is the handler's trailer, once the stream has ended.
func (c *clientStream) Trailer() metadata.MD {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trailer.Copy()
}

func (c *clientStream) CloseSend() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *clientStream) SendMsg(m any) error {
	select {
	case <-c.done:
		return io.EOF
	default:
	}
	if c.cctx.Err() != nil {
		return ctxErr(c.cctx)
	}
	select { // room in the slot: no three-way select
	case c.up <- m:
		return nil
	default:
	}
	if c.lend.stepping.Load() {
		return errTwoSends // the handler waiting for the slot is the one running this step
	}
	select {
	case c.up <- m:
		return nil
	case <-c.done:
		return io.EOF
	case <-c.cctx.Done():
		return ctxErr(c.cctx)
	}
}

// errSeenEnd is the cause of cctx's end once the client saw the stream's.
var errSeenEnd = errors.New("inproc: the client saw the stream's end")

// RecvMsg takes the handler's next message; after its end, io.EOF or its
// status (what it sent before returning comes first). A client whose
// context ended before it saw the end gets that context's status, as
// over the network, even when the handler has since returned: its return
// was most likely the answer to that cancellation. The caller's context
// is asked, not cctx: the handler's context follows the caller's on a
// goroutine of its own, which may end the handler before the caller's
// cancellation has reached cctx.
func (c *clientStream) RecvMsg(m any) error {
	return (*stream)(c).take(m, c.down, c.done, c.cctx, func() error {
		if c.ctx.Err() != nil && context.Cause(c.cctx) != errSeenEnd {
			return ctxErr(c.ctx)
		}
		c.ccancel(errSeenEnd)
		if c.err == nil {
			return io.EOF
		}
		return c.err
	})
}

// take receives the next message of ch into m. When end is closed, a
// message sent before it still comes first, then ended's error, which
// also decides when ctx ended too (select would pick either at random);
// an ended ctx alone is its status.
func (s *stream) take(m any, ch chan any, end <-chan struct{}, ctx context.Context, ended func() error) error {
	select { // a message waiting is taken without a three-way select
	case v := <-ch:
		return s.copy(m, v)
	default:
	}
	select {
	case v := <-ch:
		return s.copy(m, v)
	case <-end:
	case <-ctx.Done():
		select {
		case <-end:
		default:
			return ctxErr(ctx)
		}
	}
	select {
	case v := <-ch:
		return s.copy(m, v)
	default:
	}
	return ended()
}

// serverStream is the handler's end.
type serverStream stream

func (s *serverStream) Context() context.Context { return s.sctx }

func (s *serverStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *serverStream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	(*stream)(s).sendHead()
	return nil
}

func (s *serverStream) SetTrailer(md metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
}

func (s *serverStream) SendMsg(m any) error {
	if s.sctx.Err() != nil {
		return ctxErr(s.sctx)
	}
	(*stream)(s).sendHead()
	select { // room in the slot: no two-way select
	case s.down <- m:
		return nil
	default:
	}
	select {
	case s.down <- m:
		return nil
	case <-s.sctx.Done():
		return ctxErr(s.sctx)
	}
}

// RecvMsg takes the client's next message; io.EOF once it half-closed.
// While the client lends a step (Hand), a receive that finds no message
// runs it and looks again.
func (s *serverStream) RecvMsg(m any) error {
	st := (*stream)(s)
	for {
		select {
		case v := <-s.up:
			return s.copy(m, v)
		default:
		}
		if st.step() {
			continue
		}
		select {
		case v := <-s.up:
			return s.copy(m, v)
		case <-s.lend.offered:
		case <-s.closed:
			select {
			case v := <-s.up:
				return s.copy(m, v)
			default:
			}
			return io.EOF
		case <-s.sctx.Done():
			return ctxErr(s.sctx)
		}
	}
}

// transportStream lets a handler use grpc.SetHeader, SendHeader and
// SetTrailer on its context.
type transportStream stream

func (t *transportStream) Method() string { return t.method }

func (t *transportStream) SetHeader(md metadata.MD) error { return (*serverStream)(t).SetHeader(md) }

func (t *transportStream) SendHeader(md metadata.MD) error { return (*serverStream)(t).SendHeader(md) }

func (t *transportStream) SetTrailer(md metadata.MD) error {
	(*serverStream)(t).SetTrailer(md)
	return nil
}
