package httpx

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

// The upstream client's small connection buffers change how many reads
// and writes a message takes, never its bytes: requests whose headers and
// bodies fall on each side of the buffer size arrive whole, and an
// answer's headers and streamed body (events on each side of the size,
// in one burst and one at a time) come back whole through Tunnel.
func TestSmallConnectionBuffersKeepEveryByte(t *testing.T) {
	sizes := []int{0, 1, ReadBufferSize - 1, ReadBufferSize, ReadBufferSize + 1, 4 << 10, 1 << 20}
	events := func(n int) []byte { // SSE events of sizes around the buffer's
		var b bytes.Buffer
		for i, sz := range sizes[1:] {
			if i == n {
				break
			}
			fmt.Fprintf(&b, "data: %s\n\n", strings.Repeat(string(rune('a'+i)), sz))
		}
		return b.Bytes()
	}
	longHeader := strings.Repeat("h", 3*ReadBufferSize)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Body-Sum", fmt.Sprintf("%x", sum))
		w.Header().Set("X-Echo", r.Header.Get("X-Long"))
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Long-Answer", longHeader)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		all := events(len(sizes))
		if r.URL.Query().Get("paced") == "" {
			_, _ = w.Write(all) // one burst
			return
		}
		for ev := range bytes.SplitAfterSeq(all, []byte("\n\n")) {
			_, _ = w.Write(ev)
			_ = rc.Flush()
		}
	})
	// Plain HTTP/1, HTTP/1 over TLS and HTTP/2: TLS reads its records
	// through the connection's read-ahead (aheadConn) in its own sizes.
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(handler)
	secure.TLS = &tls.Config{NextProtos: []string{"http/1.1"}}
	secure.StartTLS()
	defer secure.Close()
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	for _, up := range []*httptest.Server{plain, secure, h2} {
		client := NewClient(0)
		if up.TLS != nil {
			client.Transport.(*http.Transport).TLSClientConfig = up.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		}
		for _, paced := range []bool{false, true} {
			for _, n := range sizes {
				t.Run(fmt.Sprintf("tls=%v/h2=%v/body=%d/paced=%v", up.TLS != nil, up.EnableHTTP2, n, paced), func(t *testing.T) {
					body := bytes.Repeat([]byte{'b'}, n)
					url := up.URL
					if paced {
						url += "?paced=1"
					}
					req, err := NewRequest(t.Context(), http.MethodPost, url, map[string][]string{"X-Long": {longHeader}}, body, Credentials{})
					if err != nil {
						t.Fatal(err)
					}
					var got []byte
					var head http.Header
					var ended bool
					em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
						switch f.Type {
						case execution.FrameTypeResponseStart:
							head = f.Header
						case execution.FrameTypeBody:
							got = append(got, f.Body...)
						case execution.FrameTypeEnd:
							ended = true
						}
					})
					if err := Tunnel(t.Context(), client, req, em); err != nil {
						t.Fatal(err)
					}
					if want := fmt.Sprintf("%x", sha256.Sum256(body)); head.Get("X-Body-Sum") != want {
						t.Errorf("upstream read a body of sum %s, want %s (%d bytes)", head.Get("X-Body-Sum"), want, n)
					}
					if wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[up.EnableHTTP2]; head.Get("X-Proto") != wantProto {
						t.Errorf("the request went as %s, want %s", head.Get("X-Proto"), wantProto)
					}
					if head.Get("X-Echo") != longHeader || head.Get("X-Long-Answer") != longHeader {
						t.Errorf("a header longer than the buffers changed on the way (%d and %d bytes, want %d)",
							len(head.Get("X-Echo")), len(head.Get("X-Long-Answer")), len(longHeader))
					}
					if want := events(len(sizes)); !bytes.Equal(got, want) || !ended {
						t.Errorf("streamed body %d bytes (ended %v), want the upstream's %d bytes", len(got), ended, len(want))
					}
				})
			}
		}
	}
}
