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
	p := pumpOf(ctx)
	buf := eventstream.NewReadBuf()
	release := func() {
		buf.Release()
		_ = resp.Body.Close()
	}
	handed := false
	defer func() {
		if !handed {
			release()
		}
	}()
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: resp.StatusCode,
		Header: httphdr.FromUpstream(resp.Header)})
	var failed error
	// step reads once and emits what it read; everything emitted has gone
	// to p.BeforeRead by the next read.
	step := func() (done bool) {
		n, rerr := resp.Body.Read(buf.Bytes())
		if n > 0 {
			chunk := buf.Bytes()[:n] // the emitter copies it (Pump.CopiesBodies)
			if !p.CopiesBodies {
				chunk = append([]byte(nil), chunk...)
			}
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: chunk})
			buf.Grow(n)
		}
		switch {
		case errors.Is(rerr, io.EOF):
			return true
		case rerr != nil:
			failed = readFailure(ctx, resp.StatusCode, rerr)
			return true
		}
		if conn.holding() {
			return false // the next read takes bytes already read: no wait
		}
		p.beforeRead()
		return false
	}
	// end is the tunnel's end once the body's reads are over: the read
	// failure, or the end frame.
	end := func() error {
		if failed != nil {
			return failed
		}
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
		return nil
	}
	p.beforeRead()
	if p.Hand != nil && p.Hand(step, func(complete bool) error {
		for !complete {
			complete = step()
		}
		err := end()
		release()
		return err
	}, release) {
		handed = true
		return ErrHanded
	}
	for !step() {
	}
	return end()
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
