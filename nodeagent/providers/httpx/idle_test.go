package httpx

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestClientKeepsWhatItUsedAtOnce: a provider's client keeps the
// connections of its busiest moment, up to its capacity, so a second
// burst as wide as the first dials nothing; the default keeps
// minIdlePerHost, and a wider burst redials the rest.
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
			var dials atomic.Int64
			var arrived sync.WaitGroup
			var release atomic.Pointer[chan struct{}] // the burst's: closed once all of it has arrived
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gate := *release.Load()
				arrived.Done()
				<-gate // every request of the burst is upstream at once
				_, _ = io.WriteString(w, "ok")
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					dials.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			client := NewClient(c.capacity)
			defer client.CloseIdleConnections()
			burst := func() {
				arrived.Add(wide)
				gate := make(chan struct{})
				release.Store(&gate)
				var done sync.WaitGroup
				for range wide {
					done.Go(func() {
						resp, err := client.Get(srv.URL)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					})
				}
				arrived.Wait()
				close(gate)
				done.Wait()
			}
			burst()
			if n := dials.Load(); n != wide {
				t.Fatalf("the first burst of %d dialled %d connections", wide, n)
			}
			burst()
			if n := int(dials.Load()) - wide; !c.redials(n) {
				t.Fatalf("capacity %d: the second burst of %d dialled %d connections anew", c.capacity, wide, n)
			}
		})
	}
}
