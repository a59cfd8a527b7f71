package httpx

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// NewClient returns the client a provider uses upstream. It sets no
// overall timeout — a stream may legitimately last long, and the node
// watchdog owns liveness — but bounds dialing and TLS handshakes.
//
// It keeps the connections of its busiest moment, in two tiers. The
// first minIdlePerHost requests at once use connections kept idle for
// idleConnTimeout, as a proxy's usually are. When concurrent allows more
// at once, the requests beyond that use a surplus tier of up to
// concurrent − minIdlePerHost connections, which close after
// surplusIdleTimeout unused: while a provider is as busy as its capacity
// its connections are reused rather than closed and dialled again (a
// fixed 64 made a node serving 1,000 concurrent streams dial most of them
// anew, 16 % more CPU a stream), and once the burst is over they go soon.
// Kept for 90 s, a burst's thousand idle connections — two net/http
// goroutines each, whose stacks every collection scans — cost the
// requests after it 30 % more CPU for as long (docs/performance.md).
func NewClient(concurrent int) *http.Client {
	warm := newTransport(minIdlePerHost, idleConnTimeout)
	if concurrent <= minIdlePerHost {
		return &http.Client{Transport: warm}
	}
	return &http.Client{Transport: &tiered{warm: warm, surplus: newTransport(concurrent-minIdlePerHost, surplusIdleTimeout)}}
}

// minIdlePerHost is the size of the warm tier, kept idle up to
// idleConnTimeout; a surplus connection closes after surplusIdleTimeout
// unused.
const (
	minIdlePerHost  = 64
	idleConnTimeout = 90 * time.Second
)

// surplusIdleTimeout is a variable for the tests, which cannot wait for it.
var surplusIdleTimeout = 5 * time.Second

func newTransport(idle int, idleTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialAhead((&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // bounded per host, below
		MaxIdleConnsPerHost:   idle,
		IdleConnTimeout:       idleTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Response headers travel to the edge in one message, which the
		// edge bounds (wire.EdgeMaxRecvMessage).
		MaxResponseHeaderBytes: 64 << 10,
		ReadBufferSize:         ReadBufferSize,
		WriteBufferSize:        WriteBufferSize,
	}
}

// tiered sends a request on the warm tier while fewer than
// minIdlePerHost are upstream, on the surplus tier otherwise. A request
// is upstream until its response's body ends or is closed: the moment
// its connection goes back to its tier's idle pool.
type tiered struct {
	warm, surplus *http.Transport
	upstream      atomic.Int64
}

func (t *tiered) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := t.warm
	if t.upstream.Add(1) > minIdlePerHost {
		tr = t.surplus
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.upstream.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

// CloseIdleConnections closes both tiers' idle connections
// (http.Client.CloseIdleConnections).
func (t *tiered) CloseIdleConnections() {
	t.warm.CloseIdleConnections()
	t.surplus.CloseIdleConnections()
}

// countedBody counts its request upstream until it ends or is closed.
type countedBody struct {
	io.ReadCloser
	t    *tiered
	done atomic.Bool
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *countedBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func (b *countedBody) release() {
	if b.done.CompareAndSwap(false, true) {
		b.t.upstream.Add(-1)
	}
}
