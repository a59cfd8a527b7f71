package slogx

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iopgw/iop/internal/testing/clocktest"
)

// writes records every Write it gets.
type writes struct {
	mu  sync.Mutex
	got []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, string(p))
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// TestBufferedInterval: lines are held, then written together one
// interval after the first of them; nothing is written while none is held.
func TestBufferedInterval(t *testing.T) {
	clk := clocktest.New()
	var dst writes
	b := NewBuffered(&dst, 100*time.Millisecond, clk)
	for i := range 3 {
		fmt.Fprintf(b, "line %d\n", i)
		clk.Advance(10 * time.Millisecond)
	}
	if got := dst.all(); len(got) != 0 {
		t.Fatalf("written before the interval: %q", got)
	}
	clk.Advance(70 * time.Millisecond) // 100 ms after the first line
	if got := dst.all(); len(got) != 1 || got[0] != "line 0\nline 1\nline 2\n" {
		t.Fatalf("after the interval: %q, want the three lines in one write", got)
	}
	clk.Advance(time.Second)
	if got := dst.all(); len(got) != 1 {
		t.Fatalf("a write with nothing held: %q", got)
	}
	fmt.Fprintln(b, "later")
	clk.Advance(99 * time.Millisecond)
	if got := dst.all(); len(got) != 1 {
		t.Fatalf("the next line written early: %q", got)
	}
	clk.Advance(time.Millisecond)
	if got := dst.all(); len(got) != 2 || got[1] != "later\n" {
		t.Fatalf("the next line: %q", got)
	}
}

// TestBufferedFull: past maxHeld bytes the held lines go at once, in
// order, and a line larger than maxHeld goes through after them.
func TestBufferedFull(t *testing.T) {
	var dst writes
	b := NewBuffered(&dst, time.Hour, nil)
	line := strings.Repeat("x", 1023) + "\n"
	for range maxHeld / len(line) {
		b.Write([]byte(line))
	}
	if got := dst.all(); len(got) != 0 {
		t.Fatalf("%d writes before maxHeld was passed", len(got))
	}
	b.Write([]byte("next\n"))
	if got := dst.all(); len(got) != 1 || len(got[0]) != maxHeld {
		t.Fatalf("passing maxHeld: %d writes, want one of %d bytes", len(got), maxHeld)
	}
	huge := strings.Repeat("y", maxHeld+1)
	b.Write([]byte(huge))
	got := dst.all()
	if len(got) != 3 || got[1] != "next\n" || got[2] != huge {
		t.Fatalf("a line larger than maxHeld: %d writes, want the held line and then it", len(got))
	}
}

// TestFlushAt: a warning goes out at once, with the lines held before it;
// Close writes what is held, and lines after Close are written as they
// come.
func TestFlushAt(t *testing.T) {
	var dst writes
	b := NewBuffered(&dst, time.Hour, nil)
	log := slog.New(FlushAt(slog.NewTextHandler(b, nil), slog.LevelWarn, b)).With("component", "edge")
	log.Info("request", "status", 200)
	if got := dst.all(); len(got) != 0 {
		t.Fatalf("an info line written at once: %q", got)
	}
	log.Warn("upstream failed")
	got := dst.all()
	if len(got) != 1 || !strings.Contains(got[0], "msg=request") || !strings.Contains(got[0], "msg=\"upstream failed\"") ||
		strings.Index(got[0], "msg=request") > strings.Index(got[0], "upstream failed") {
		t.Fatalf("after a warning: %q, want the info line and then the warning", got)
	}
	log.WithGroup("g").Info("held")
	if len(dst.all()) != 1 {
		t.Fatal("an info line of a group written at once")
	}
	b.Close()
	log.Info("after close")
	if got := dst.all(); len(got) != 3 || !strings.Contains(got[1], "msg=held") || !strings.Contains(got[2], "after close") {
		t.Fatalf("close: %q", got)
	}
}

// TestBufferedConcurrent: lines logged from many goroutines all arrive,
// each whole.
func TestBufferedConcurrent(t *testing.T) {
	var dst bytes.Buffer
	var mu sync.Mutex
	b := NewBuffered(lockedWriter{&mu, &dst}, time.Millisecond, nil)
	log := slog.New(slog.NewTextHandler(b, nil))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				log.Info("line", "g", g, "i", i, "pad", strings.Repeat("p", i%300))
			}
		})
	}
	wg.Wait()
	b.Close()
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSuffix(dst.String(), "\n"), "\n")
	if len(lines) != 8*500 {
		t.Fatalf("%d lines, want %d", len(lines), 8*500)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "time=") || strings.Count(l, "msg=line") != 1 {
			t.Fatalf("a line not whole: %q", l)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
