package fleet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iopgw/iop/internal/slogx"
)

// TestNodePortConnectionLimits: connections over the per-source limit are
// closed before a byte is read, and a closed connection frees its slot.
func TestNodePortConnectionLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	lim := LimitConns(ln, 2, 100, slog.New(slog.NewTextHandler(&log, nil)))
	defer lim.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := lim.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a1, a2 := <-accepted, <-accepted
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection from one source: %v, want it closed", err)
	}
	a1.Close()
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
	a2.Close()
	if !strings.Contains(log.String(), "over the connection limit") {
		t.Fatalf("log %q", log.String())
	}
}

// TestRefusedNodesAreLoggedSampled: a refused node is logged with the
// reason and its address, at most once a second however many try.
func TestRefusedNodesAreLoggedSampled(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n1", Token: "tok"})
	var mu sync.Mutex
	var buf bytes.Buffer
	e.hub.audit = slogx.NewSampled(slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil)), time.Hour)
	c := e.client(t)
	for range 50 {
		if _, _, err := session(t, context.Background(), c, "wrong-token", "n1"); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("wrong token: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(buf.String(), "node refused: invalid token"); n != 1 || strings.Contains(buf.String(), "wrong-token") {
		t.Fatalf("%d audit lines: %s", n, buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
