package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
)

// Tunnel sends req upstream and emits the answer as frames: response_start
// with the status and end-to-end headers, one body frame per read (so an
// SSE event the upstream wrote travels without waiting for more), then
// end. The body is not decoded here: the edge reads the usage it reports
// from the bytes it forwards. An upstream read error mid-body becomes an
// error frame — never a tidy end — and a request that cannot be sent
// becomes an error frame before any response_start. A body frame's bytes
// are the receiver's, unless ctx's Pump says the emitter copies them.
// The reads may run elsewhere, and with them the tunnel's end (the
// Pump's Hand: Tunnel then returns ErrHanded at once).
func Tunnel(ctx context.Context, c *http.Client, req *http.Request, emit *execution.FrameEmitter) error {
	req, conn := traced(req)
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return Unreachable(err)
	}
	t := &tunnelBody{ctx: ctx, resp: resp, conn: conn, p: pumpOf(ctx), buf: eventstream.NewReadBuf(), emit: emit}
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: resp.StatusCode,
		Header: httphdr.FromUpstream(resp.Header)})
	t.p.beforeRead()
	if t.p.Hand != nil && t.p.Hand(t.step, t.tail, t.release) {
		handed = true
		return ErrHanded
	}
	for !t.step() {
	}
	return t.end()
}

// tunnelBody is a tunnel's upstream answer once its head was emitted:
// the body's reads, and the tunnel's end.
type tunnelBody struct {
	ctx    context.Context
	resp   *http.Response
	conn   *upstreamConn
	p      *Pump
	buf    *eventstream.ReadBuf
	emit   *execution.FrameEmitter
	failed error // the read failure that ended the body
}

// step reads once and emits what it read; everything emitted has gone
// to p.BeforeRead by the next read. It reports whether the body's reads
// are over.
func (t *tunnelBody) step() (done bool) {
	n, rerr := t.resp.Body.Read(t.buf.Bytes())
	if n > 0 {
		chunk := t.buf.Bytes()[:n] // the emitter copies it (Pump.CopiesBodies)
		if !t.p.CopiesBodies {
			chunk = append([]byte(nil), chunk...)
		}
		t.emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: chunk})
		t.buf.Grow(n)
	}
	switch {
	case errors.Is(rerr, io.EOF):
		return true
	case rerr != nil:
		t.failed = readFailure(t.ctx, t.resp.StatusCode, rerr)
		return true
	}
	if t.conn.holding() {
		return false // the next read takes bytes already read: no wait
	}
	t.p.beforeRead()
	return false
}

// end is the tunnel's end once the body's reads are over: the read
// failure, or the end frame.
func (t *tunnelBody) end() error {
	if t.failed != nil {
		return t.failed
	}
	t.emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}

// tail is the tunnel's end where its reads were handed: the rest of the
// reads (unless complete), the end, and the body's release.
func (t *tunnelBody) tail(complete bool) error {
	for !complete {
		complete = t.step()
	}
	err := t.end()
	t.release()
	return err
}

// release gives back the read buffer and closes the upstream body.
func (t *tunnelBody) release() {
	t.buf.Release()
	_ = t.resp.Body.Close()
}

// ErrHanded is Tunnel's result when its Pump's Hand took the body's reads
// and the tunnel's end: its real result is what Hand's tail returns.
var ErrHanded = errors.New("httpx: the tunnel's reads were handed over")

// readFailure is the error of an upstream body read that failed.
func readFailure(ctx context.Context, status int, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return execution.UpstreamFailure(&execution.UpstreamError{Status: status, Message: fmt.Sprintf("reading upstream body: %v", err)})
}
