package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"syscall"
)

// Read-ahead: an upstream connection reads through a small buffer
// (ReadBufferSize), held for the connection's life, so a held stream
// costs little. A burst larger than that buffer — a model's events
// arriving faster than they are read, a JSON answer over 1 KiB — would
// then take a system call per buffer. aheadConn reads the rest of such a
// burst in one call, into a pooled buffer held only until its bytes are
// read: after a read that filled the caller's buffer, it reads once more
// without waiting, taking whatever the socket already has. A read that
// found less than the caller's buffer (the socket drained: a paced token)
// costs nothing more, and a read that waits never holds the pooled
// buffer.
const aheadSize = 16 << 10

var aheadPool = sync.Pool{New: func() any { b := make([]byte, aheadSize); return &b }}

// aheadConn is an upstream connection with read-ahead. It is read by one
// goroutine at a time (net/http's persistent connection reads it from its
// read loop or the body's reader, never both at once).
type aheadConn struct {
	net.Conn
	raw syscall.RawConn

	buf  *[]byte // pooled; buf[r:w] is read ahead and not yet returned
	r, w int
	err  error // what the read-ahead met after its bytes, returned next

	// The read-ahead's system call, bound once per connection, and what
	// it read into and met: a closure made at each read-ahead escaped to
	// the heap with what it captured.
	readRaw func(fd uintptr) bool
	into    []byte
	n       int
	rawErr  error
}

// dialAhead wraps dial's connections with read-ahead when they have a
// file descriptor to read without waiting (TCP); others pass unchanged.
func dialAhead(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return c, err
		}
		sc, ok := c.(syscall.Conn)
		if !ok {
			return c, nil
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return c, nil
		}
		ac := &aheadConn{Conn: c, raw: raw}
		ac.readRaw = ac.read
		return ac, nil
	}
}

// read is the read-ahead's system call on the connection's descriptor.
func (c *aheadConn) read(fd uintptr) bool {
	c.n, c.rawErr = syscall.Read(int(fd), c.into)
	return true // never wait: an empty socket is left to the next read
}

func (c *aheadConn) Read(p []byte) (int, error) {
	if c.buf != nil {
		n := copy(p, (*c.buf)[c.r:c.w])
		if c.r += n; c.r == c.w {
			aheadPool.Put(c.buf)
			c.buf = nil
		}
		return n, nil
	}
	if c.err != nil {
		err := c.err
		c.err = nil
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if err == nil && n == len(p) && n > 0 && n < aheadSize {
		c.readAhead()
	}
	return n, err
}

// readAhead reads what the socket already holds, without waiting.
func (c *aheadConn) readAhead() {
	b := aheadPool.Get().(*[]byte)
	c.into, c.n, c.rawErr = *b, 0, nil
	rerr := c.raw.Read(c.readRaw)
	n, err := c.n, c.rawErr
	c.into, c.rawErr = nil, nil
	if rerr != nil {
		n, err = 0, nil // closed or past its deadline: the next read says so
	}
	switch {
	case n > 0:
		c.buf, c.r, c.w = b, 0, n
		return
	case err == nil && n == 0:
		c.err = io.EOF
	case err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EINTR):
		c.err = &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("read", err)}
	}
	aheadPool.Put(b)
}

// upstreamConn is the connection a request went on, learnt from its
// trace (held in the same allocation): a pump asks it whether bytes are
// read ahead.
type upstreamConn struct {
	c     *aheadConn
	trace httptrace.ClientTrace
}

func (u *upstreamConn) gotConn(i httptrace.GotConnInfo) { u.c, _ = i.Conn.(*aheadConn) }

// holding reports whether the connection holds bytes read ahead: the
// next read of the body takes them without waiting for the upstream.
// Only the goroutine reading the body may ask.
func (u *upstreamConn) holding() bool { return u.c != nil && u.c.buf != nil }

// traced returns req with a trace that learns its connection.
func traced(req *http.Request) (*http.Request, *upstreamConn) {
	u := &upstreamConn{}
	u.trace.GotConn = u.gotConn
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &u.trace)), u
}
