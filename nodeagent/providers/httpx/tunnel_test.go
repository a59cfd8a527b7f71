package httpx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// oneEventThenCut answers with one event and cuts the connection mid-body.
func oneEventThenCut(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = fmt.Fprint(w, "data: 0\n\n")
	_ = http.NewResponseController(w).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
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
	return Tunnel(WithPump(t.Context(), pump), NewClient(0), req, em)
}

// Tunnel's reads go the same way handed over or not: each read's frame
// is emitted and the read hook run before the read's step returns ("|"),
// so what a handed read produced is sent before the next read blocks;
// the hook also runs once before the first read.
func TestTunnelReadsAreStepsHandedOrNot(t *testing.T) {
	for _, handed := range []bool{false, true} {
		t.Run(fmt.Sprintf("handed=%v", handed), func(t *testing.T) {
			next := make(chan struct{}, 1)
			up := httptest.NewServer(pacedSSE(next))
			defer up.Close()
			var got []string
			pump := &Pump{}
			result := make(chan error, 1)
			want := []string{"response_start:", "hook", "body:data: 0", "hook", "body:data: 1", "hook", "body:data: 2", "hook", "end:"}
			if handed {
				pump.Hand = func(step func() bool, tail func(bool) error, _ func()) bool {
					go func() { // another goroutine runs the steps, as the edge's receive does
						for end := false; !end; {
							end = step()
							got = append(got, "|")
						}
						result <- tail(true)
					}()
					return true
				}
				want = []string{"response_start:", "hook", "body:data: 0", "hook", "|", "body:data: 1", "hook", "|", "body:data: 2", "hook", "|", "|", "end:"}
			}
			err := tunnelRecord(t, up.URL, pump, next, &got)
			if handed {
				if !errors.Is(err, ErrHanded) {
					t.Fatalf("Tunnel returned %v, want ErrHanded", err)
				}
				err = <-result
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("frames, hooks and steps %q, want %q", got, want)
			}
		})
	}
}

// burstUpstream answers every connection with an event stream of n
// events, each its own chunk, written in one write: the whole answer is
// in the client's socket at once, as when a model's events pile up
// faster than they are read.
func burstUpstream(t *testing.T, n int) (url string, body []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var b, wire strings.Builder
	wire.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for i := range n {
		ev := fmt.Sprintf("data: {\"i\":%d,\"pad\":%q}\n\n", i, strings.Repeat("x", 200))
		b.WriteString(ev)
		fmt.Fprintf(&wire, "%x\r\n%s\r\n", len(ev), ev)
	}
	wire.WriteString("0\r\n\r\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, wire.String())
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return "http://" + ln.Addr().String(), []byte(b.String())
}

// TestTunnelSendsABurstTogether: what one upstream read brought in goes
// as one message — the read hook does not run while the connection holds
// bytes read ahead — so a burst of 32 events (7 KiB, many chunks, read
// through a 1 KiB buffer) takes a few messages, not one per buffer, and
// arrives whole. (TestTunnelReadsAreStepsHandedOrNot holds the other
// side: a paced event is sent before the next read waits.)
func TestTunnelSendsABurstTogether(t *testing.T) {
	url, want := burstUpstream(t, 32)
	hooks, reads := 0, 0
	var got []byte
	pump := &Pump{BeforeRead: func() { hooks++ }}
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
		if f.Type == execution.FrameTypeBody {
			reads++
			got = append(got, f.Body...)
		}
	})
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Tunnel(WithPump(t.Context(), pump), NewClient(0), req, em); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the burst arrived as %d bytes, want the upstream's %d", len(got), len(want))
	}
	// One hook before the first read; then one where the read-ahead
	// drained and what the 1 KiB buffer still held was read.
	if hooks > 3 || reads < 4 {
		t.Fatalf("%d body reads went out as %d messages, want at most 3", reads, hooks)
	}
	t.Logf("%d body reads, %d messages", reads, hooks)
}

// A read that fails in a handed step fails the tunnel as it would in
// Tunnel's own loop: an upstream failure, never a tidy end.
func TestHandedReadFailureIsTheTunnels(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { oneEventThenCut(w) }))
	defer up.Close()
	var frames []execution.FrameType
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) { frames = append(frames, f.Type) })
	result := make(chan error, 1)
	pump := &Pump{Hand: func(step func() bool, tail func(bool) error, _ func()) bool {
		go func() {
			for !step() {
			}
			result <- tail(true)
		}()
		return true
	}}
	req, _ := http.NewRequest(http.MethodPost, up.URL, nil)
	if err := Tunnel(WithPump(context.Background(), pump), http.DefaultClient, req, em); !errors.Is(err, ErrHanded) {
		t.Fatalf("Tunnel returned %v, want ErrHanded", err)
	}
	var f *execution.ExecutionFailure
	if err := <-result; !errors.As(err, &f) || f.Code != execution.FailureCodeUpstreamError {
		t.Fatalf("a cut body: %v, want an upstream failure", err)
	}
	if slices.Contains(frames, execution.FrameTypeEnd) {
		t.Fatalf("frames %v end tidily", frames)
	}
}

// A handed tunnel returns ErrHanded at once; the taker's steps read the
// body, and the tail — complete or not — ends it: the rest of the reads,
// the end frame, the tunnel's result.
func TestHandedTunnelEndsInItsTail(t *testing.T) {
	for _, complete := range []bool{true, false} {
		t.Run(fmt.Sprintf("complete=%v", complete), func(t *testing.T) {
			next := make(chan struct{}, 1)
			up := httptest.NewServer(pacedSSE(next))
			defer up.Close()
			var got []string
			result := make(chan error, 1)
			pump := &Pump{Hand: func(step func() bool, tail func(bool) error, abort func()) bool {
				go func() { // the edge's receive runs the steps; a goroutine of its own the tail
					done := step() // one read
					for complete && !done {
						done = step()
					}
					got = append(got, "tail")
					result <- tail(done)
				}()
				return true
			}}
			if err := tunnelRecord(t, up.URL, pump, next, &got); !errors.Is(err, ErrHanded) {
				t.Fatalf("Tunnel returned %v, want ErrHanded", err)
			}
			if err := <-result; err != nil {
				t.Fatalf("tail: %v", err)
			}
			want := []string{"response_start:", "hook", "body:data: 0", "hook", "body:data: 1", "hook", "body:data: 2", "hook", "tail", "end:"}
			if !complete {
				want = []string{"response_start:", "hook", "body:data: 0", "hook", "tail", "body:data: 1", "hook", "body:data: 2", "hook", "end:"}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("frames, hooks and tail %q, want %q", got, want)
			}
		})
	}
}

// A handed tunnel whose body is cut fails in its tail, never a tidy end;
// abort (a step's panic) closes the body without ending the tunnel.
func TestHandedTunnelFailureAndAbort(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cut" {
			oneEventThenCut(w)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprint(w, "data: 0\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // held until the client closes the body
	}))
	defer up.Close()
	var frames []execution.FrameType
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) { frames = append(frames, f.Type) })
	result := make(chan error, 1)
	req, _ := http.NewRequest(http.MethodPost, up.URL+"/cut", nil)
	err := Tunnel(WithPump(context.Background(), &Pump{Hand: func(step func() bool, tail func(bool) error, _ func()) bool {
		go func() { result <- tail(false) }()
		return true
	}}), http.DefaultClient, req, em)
	if !errors.Is(err, ErrHanded) {
		t.Fatalf("Tunnel returned %v, want ErrHanded", err)
	}
	var f *execution.ExecutionFailure
	if err = <-result; !errors.As(err, &f) || f.Code != execution.FailureCodeUpstreamError || slices.Contains(frames, execution.FrameTypeEnd) {
		t.Fatalf("a cut body: %v, frames %v; want an upstream failure, no end", err, frames)
	}

	frames = nil
	aborted := make(chan struct{})
	req, _ = http.NewRequest(http.MethodPost, up.URL+"/held", nil)
	err = Tunnel(WithPump(context.Background(), &Pump{Hand: func(step func() bool, _ func(bool) error, abort func()) bool {
		go func() { step(); abort(); close(aborted) }()
		return true
	}}), http.DefaultClient, req, em)
	if !errors.Is(err, ErrHanded) {
		t.Fatalf("Tunnel returned %v, want ErrHanded", err)
	}
	<-aborted // the held upstream returns only once abort closed the body
	if slices.Contains(frames, execution.FrameTypeEnd) {
		t.Fatalf("frames %v after abort", frames)
	}
}
