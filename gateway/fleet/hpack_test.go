package fleet

import (
	"bytes"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"

	"github.com/iopgw/iop/wire"
)

// TestNodePortHeaderListIsBounded: before any token is checked, the node
// port decodes at most wire.EdgeMaxHeaderList of headers. Four
// unauthenticated connections streaming CONTINUATION frames of header
// data (the HPACK amplification grpc-go's 16 MiB default allows) are cut
// off, and the edge's heap stays small.
func TestNodePortHeaderListIsBounded(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(e.hub.ServerOptions(nil)...)
	wire.RegisterNodeLinkServer(srv, e.hub)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	sent := make([]int, 4)
	for i := range sent {
		wg.Go(func() { sent[i] = floodHeaders(t, ln.Addr().String(), 32<<20, 3*time.Second) })
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for i, n := range sent {
		if n >= 32<<20 {
			t.Errorf("connection %d: the edge took all %d MiB of headers", i, n>>20)
		}
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap growth under 4 floods: %d KiB", grew>>10)
	if grew > 16<<20 {
		t.Fatalf("heap grew %d MiB under unauthenticated header floods", grew>>20)
	}
}

// floodHeaders opens an HTTP/2 connection and sends one request whose
// header block grows by CONTINUATION frames until limit bytes are sent,
// the edge closes the connection, or d passes. It returns the bytes sent.
func floodHeaders(t *testing.T, addr string, limit int, d time.Duration) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return 0
	}
	fr := http2.NewFramer(conn, conn)
	if fr.WriteSettings() != nil {
		return 0
	}
	go func() { // drain what the edge sends (SETTINGS, GOAWAY)
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/iop.nodelink.v1.NodeLink/Session"}, {Name: ":authority", Value: "edge"},
		{Name: "content-type", Value: "application/grpc"}} {
		_ = enc.WriteField(f)
	}
	if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes()}) != nil {
		return 0
	}
	sent := hb.Len()
	pad := hpack.HeaderField{Name: "x-pad", Value: strings.Repeat("a", 8000)}
	for sent < limit {
		hb.Reset()
		_ = enc.WriteField(pad)
		if fr.WriteContinuation(1, false, hb.Bytes()) != nil {
			break
		}
		sent += hb.Len()
	}
	return sent
}
