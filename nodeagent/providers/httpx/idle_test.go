package httpx

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientKeepsWhatItUsedAtOnce: a provider's client keeps the
// connections of its busiest moment, up to its capacity, so a second
// burst as wide as the first dials nothing; the default keeps
// minIdlePerHost, and a wider burst redials the rest. Every response's
// end, read or closed, counts its request off (the next one goes on the
// warm tier).
func TestClientKeepsWhatItUsedAtOnce(t *testing.T) {
	const wide = minIdlePerHost + 36
	for _, c := range []struct {
		name     string
		capacity int
		redials  func(int) bool
	}{
		{"capacity", wide, func(n int) bool { return n == 0 }},
		{"default", 0, func(n int) bool { return n >= wide-minIdlePerHost }},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newBurstServer(t)
			client := NewClient(c.capacity)
			defer client.CloseIdleConnections()
			up.burst(t, client, wide, false)
			if n := up.dials.Load(); n != wide {
				t.Fatalf("the first burst of %d dialled %d connections", wide, n)
			}
			up.burst(t, client, wide, false)
			if n := int(up.dials.Load()) - wide; !c.redials(n) {
				t.Fatalf("capacity %d: the second burst of %d dialled %d connections anew", c.capacity, wide, n)
			}
			if tt, ok := client.Transport.(*tiered); ok {
				if n := tt.upstream.Load(); n != 0 {
					t.Fatalf("%d requests counted upstream after every response ended", n)
				}
			}
		})
	}
}

// burstServer answers a burst of width requests only once all of them
// have arrived, so that they are upstream at once; it counts the
// connections opened and closed.
type burstServer struct {
	*httptest.Server
	dials, closes atomic.Int64
	closed        chan struct{} // a receive for each connection closed
	arrived       sync.WaitGroup
	release       atomic.Pointer[chan struct{}]
}

func newBurstServer(t *testing.T) *burstServer {
	b := &burstServer{closed: make(chan struct{}, 1024)}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate := b.release.Load(); gate != nil {
			b.arrived.Done()
			<-*gate
		}
		_, _ = io.WriteString(w, "ok")
	}))
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.dials.Add(1)
		case http.StateClosed:
			b.closes.Add(1)
			b.closed <- struct{}{}
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

// burst sends width requests at once with client and waits for their
// answers, read to the end (unread: closed unread instead).
func (b *burstServer) burst(t *testing.T, client *http.Client, width int, unread bool) {
	b.arrived.Add(width)
	gate := make(chan struct{})
	b.release.Store(&gate)
	var done sync.WaitGroup
	for range width {
		done.Go(func() {
			resp, err := client.Get(b.URL)
			if err != nil {
				t.Error(err)
				return
			}
			if !unread {
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			_ = resp.Body.Close()
		})
	}
	b.arrived.Wait()
	close(gate)
	done.Wait()
	b.release.Store(nil)
}

// TestSurplusConnectionsCloseSoon: the connections a burst opened beyond
// the warm tier close once unused for surplusIdleTimeout, the warm tier's
// stay; requests one at a time after that dial nothing.
func TestSurplusConnectionsCloseSoon(t *testing.T) {
	defer func(d time.Duration) { surplusIdleTimeout = d }(surplusIdleTimeout)
	surplusIdleTimeout = 50 * time.Millisecond
	const wide = minIdlePerHost + 20
	up := newBurstServer(t)
	client := NewClient(4 * wide)
	defer client.CloseIdleConnections()
	up.burst(t, client, wide, false)
	if n := up.dials.Load(); n != wide {
		t.Fatalf("the burst of %d dialled %d connections", wide, n)
	}
	timeout := time.After(10 * time.Second)
	for range wide - minIdlePerHost {
		select {
		case <-up.closed:
		case <-timeout:
			t.Fatalf("%d connections closed after the burst, want the surplus's %d", up.closes.Load(), wide-minIdlePerHost)
		}
	}
	for range 3 {
		resp, err := client.Get(up.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	if n := up.dials.Load(); n != wide {
		t.Fatalf("requests one at a time after the burst dialled %d connections", n-wide)
	}
	if n := up.closes.Load(); n != wide-minIdlePerHost {
		t.Fatalf("%d connections closed, want the surplus's %d: the warm tier's stay", n, wide-minIdlePerHost)
	}
}

// TestUnreadResponsesCountOff: a response closed unread ends its
// request's count too, and a request that failed is not counted.
func TestUnreadResponsesCountOff(t *testing.T) {
	up := newBurstServer(t)
	client := NewClient(4 * minIdlePerHost)
	defer client.CloseIdleConnections()
	tt := client.Transport.(*tiered)
	up.burst(t, client, minIdlePerHost+8, true)
	if n := tt.upstream.Load(); n != 0 {
		t.Fatalf("%d requests counted upstream after every response was closed", n)
	}
	if _, err := client.Get("http://127.0.0.1:1/"); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	if n := tt.upstream.Load(); n != 0 {
		t.Fatalf("%d requests counted upstream after a failed one", n)
	}
}
