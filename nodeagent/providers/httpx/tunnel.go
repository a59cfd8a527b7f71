package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
)

// Read sizes of the tunnel pump: each upstream read becomes one body
// frame, so an SSE event written by the upstream travels on its own
// without waiting for more. A tunnel starts with a small buffer (a token
// stream's events are a few hundred bytes, and an open stream holds its
// buffer while it waits) and moves to the large one once a read fills
// the small one (a large body, a burst).
const (
	smallBuf = 4 << 10
	largeBuf = 32 << 10
)

// bufPools recycle read buffers by size: one per in-flight tunnel, not
// per request.
var bufPools = map[int]*sync.Pool{
	smallBuf: {New: func() any { b := make([]byte, smallBuf); return &b }},
	largeBuf: {New: func() any { b := make([]byte, largeBuf); return &b }},
}

// readBuf is a tunnel's pooled read buffer.
type readBuf struct{ b *[]byte }

func newReadBuf() *readBuf { return &readBuf{b: bufPools[smallBuf].Get().(*[]byte)} }

// grow moves to the large buffer after a read filled the small one.
func (r *readBuf) grow(n int) {
	if n == len(*r.b) && n == smallBuf {
		r.release()
		r.b = bufPools[largeBuf].Get().(*[]byte)
	}
}

func (r *readBuf) release() { bufPools[len(*r.b)].Put(r.b) }

// Tunnel sends req upstream and emits the answer as frames: response_start
// with the status and end-to-end headers, one body frame per read, then
// end. The body is not decoded here: the edge reads the usage it reports
// from the bytes it forwards. An upstream read error mid-body becomes an
// error frame — never a tidy end — and a request that cannot be sent
// becomes an error frame before any response_start.
func Tunnel(ctx context.Context, c *http.Client, req *http.Request, emit *execution.FrameEmitter) error {
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return Unreachable(err)
	}
	defer resp.Body.Close()
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: resp.StatusCode,
		Header: httphdr.FromUpstream(resp.Header)})
	body := hooked(ctx, resp.Body)
	buf := newReadBuf()
	defer func() { buf.release() }()
	for {
		n, rerr := body.Read(*buf.b)
		if n > 0 {
			chunk := append([]byte(nil), (*buf.b)[:n]...)
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: chunk})
			buf.grow(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return execution.UpstreamFailure(&execution.UpstreamError{Status: resp.StatusCode, Message: fmt.Sprintf("reading upstream body: %v", rerr)})
		}
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}
