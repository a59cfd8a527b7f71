package httpx

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
)

// aheadPair returns the client end (with read-ahead) and the server end
// of a loopback TCP connection.
func aheadPair(t *testing.T) (*aheadConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := dialAhead((&net.Dialer{}).DialContext)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	ac, ok := c.(*aheadConn)
	if !ok {
		t.Fatalf("a TCP connection dialled as %T, want read-ahead", c)
	}
	return ac, s
}

// TestReadAheadTakesABurstAtOnce: a read that fills the caller's buffer
// takes the rest of what the socket holds in the same breath; the next
// reads are served from it, byte for byte, and the pooled buffer goes
// back once they drained it.
func TestReadAheadTakesABurstAtOnce(t *testing.T) {
	c, s := aheadPair(t)
	burst := bytes.Repeat([]byte("0123456789abcdef"), 640) // 10 KiB, written at once
	if _, err := s.Write(burst); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, ReadBufferSize)
	if _, err := io.ReadFull(c, p); err != nil {
		t.Fatal(err)
	}
	if c.buf == nil || c.w-c.r != len(burst)-len(p) {
		t.Fatalf("after a read that filled %d bytes, %d are read ahead, want the burst's other %d", len(p), c.w-c.r, len(burst)-len(p))
	}
	got := append([]byte(nil), p...)
	for len(got) < len(burst) {
		n, err := c.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, burst) {
		t.Fatal("the burst changed on the way through the read-ahead")
	}
	if c.buf != nil {
		t.Fatal("the read-ahead buffer is held after its bytes were read")
	}
}

// TestReadAheadLeavesAPacedReadAlone: a read that found less than the
// caller's buffer (the socket drained) reads nothing more and holds no
// buffer.
func TestReadAheadLeavesAPacedReadAlone(t *testing.T) {
	c, s := aheadPair(t)
	if _, err := s.Write([]byte("data: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, ReadBufferSize)
	n, err := c.Read(p)
	if err != nil || string(p[:n]) != "data: {}\n\n" {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if c.buf != nil || c.err != nil {
		t.Fatal("a short read read ahead")
	}
}

// TestReadAheadKeepsTheEnd: the peer's close met by the read-ahead is
// the next read's io.EOF, after the bytes before it, and stays EOF.
func TestReadAheadKeepsTheEnd(t *testing.T) {
	c, s := aheadPair(t)
	if _, err := s.Write(bytes.Repeat([]byte{'x'}, ReadBufferSize)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	p := make([]byte, ReadBufferSize)
	if _, err := io.ReadFull(c, p); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if n, err := c.Read(p); n != 0 || err != io.EOF {
			t.Fatalf("read %d after the close: %d bytes, %v; want io.EOF", i, n, err)
		}
	}
}

// TestReadAheadAllocatesNothing: a read that reads ahead costs no
// allocation of its own (the pooled buffer aside, which a warm pool
// hands back): its system call is bound once per connection.
func TestReadAheadAllocatesNothing(t *testing.T) {
	c, s := aheadPair(t)
	burst := bytes.Repeat([]byte("0123456789abcdef"), 2*ReadBufferSize/16)
	p := make([]byte, ReadBufferSize)
	aheads := 0
	round := func() {
		if _, err := s.Write(burst); err != nil { // on loopback, all there when Write returns
			t.Fatal(err)
		}
		for got := 0; got < len(burst); got += len(p) {
			if _, err := io.ReadFull(c, p); err != nil {
				t.Fatal(err)
			}
			if got == 0 && c.buf != nil {
				aheads++ // the first read filled p and took the rest ahead
			}
		}
	}
	round() // the pool's buffer
	allocs := testing.AllocsPerRun(50, round)
	if aheads < 50 {
		t.Fatalf("%d of 51 rounds read ahead, want all", aheads)
	}
	if allocs > 0.5 {
		t.Fatalf("%.1f allocations a round that reads ahead, want none", allocs)
	}
}
