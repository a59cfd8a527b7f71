package httpx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

// pacedSSE answers with three events, each flushed on its own once the
// client asks for it (next), then ends the body when asked once more: each
// event is one read, and the end another.
func pacedSSE(next <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for i := range 4 {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			if i == 3 {
				return
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
		}
	})
}

// tunnelRecord runs Tunnel against url under pump and records, in order,
// the frames emitted and each read hook ("hook"); every hook asks the
// upstream for its next event.
func tunnelRecord(t *testing.T, url string, pump *Pump, next chan<- struct{}, got *[]string) error {
	t.Helper()
	pump.BeforeRead = func() {
		*got = append(*got, "hook")
		select {
		case next <- struct{}{}:
		default:
		}
	}
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
		*got = append(*got, string(f.Type)+":"+strings.TrimSpace(string(f.Body)))
	})
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Tunnel(WithPump(t.Context(), pump), http.DefaultClient, req, em)
}

// Tunnel's reads go the same way lent or not: each read's frame is
// emitted and the read hook run before the read's step returns ("|"), so
// what a lent read produced is sent before the next read blocks; the
// hook also runs once before the first read.
func TestTunnelReadsAreStepsLentOrNot(t *testing.T) {
	for _, lent := range []bool{false, true} {
		t.Run(fmt.Sprintf("lent=%v", lent), func(t *testing.T) {
			next := make(chan struct{}, 1)
			up := httptest.NewServer(pacedSSE(next))
			defer up.Close()
			var got []string
			pump := &Pump{}
			want := []string{"response_start:", "hook", "body:data: 0", "hook", "body:data: 1", "hook", "body:data: 2", "hook", "end:"}
			if lent {
				pump.Lend = func(step func() bool) bool {
					done := make(chan struct{})
					go func() { // another goroutine runs the steps, as the edge's receive does
						defer close(done)
						for end := false; !end; {
							end = step()
							got = append(got, "|")
						}
					}()
					<-done
					return true
				}
				want = []string{"response_start:", "hook", "body:data: 0", "hook", "|", "body:data: 1", "hook", "|", "body:data: 2", "hook", "|", "|", "end:"}
			}
			if err := tunnelRecord(t, up.URL, pump, next, &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("frames, hooks and steps %q, want %q", got, want)
			}
		})
	}
}

// A loan given back before the body's end leaves the rest to Tunnel: the
// reads go on where the lender stopped.
func TestTunnelGoesOnAfterAnUnfinishedLoan(t *testing.T) {
	next := make(chan struct{}, 1)
	up := httptest.NewServer(pacedSSE(next))
	defer up.Close()
	pump := &Pump{Lend: func(step func() bool) bool {
		step() // one read, then the loan ends early
		return false
	}}
	var got []string
	if err := tunnelRecord(t, up.URL, pump, next, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"response_start:", "hook", "body:data: 0", "hook", "body:data: 1", "hook", "body:data: 2", "hook", "end:"}
	if !slices.Equal(got, want) {
		t.Fatalf("frames and hooks %q, want %q", got, want)
	}
}

// A read that fails in a lent step fails the tunnel as it would unlent:
// an upstream failure, never a tidy end.
func TestLentReadFailureIsTheTunnels(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprint(w, "data: 0\n\n")
		_ = http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			conn.Close() // cut mid-body
		}
	}))
	defer up.Close()
	var frames []execution.FrameType
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) { frames = append(frames, f.Type) })
	pump := &Pump{Lend: func(step func() bool) bool {
		for !step() {
		}
		return true
	}}
	req, _ := http.NewRequest(http.MethodPost, up.URL, nil)
	err := Tunnel(WithPump(context.Background(), pump), http.DefaultClient, req, em)
	var f *execution.ExecutionFailure
	if !errors.As(err, &f) || f.Code != execution.FailureCodeUpstreamError {
		t.Fatalf("a cut body: %v, want an upstream failure", err)
	}
	if slices.Contains(frames, execution.FrameTypeEnd) {
		t.Fatalf("frames %v end tidily", frames)
	}
}
