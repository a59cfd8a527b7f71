package slogx

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/iopgw/iop/internal/clock"
)

// maxHeld is how many bytes of lines Buffered holds before it writes
// them, whatever the interval.
const maxHeld = 64 << 10

// Buffered is a process's log output gathered in memory and written to
// its destination in few writes: the lines held go out together within
// the interval after the first of them, when maxHeld bytes are held, on
// Flush and on Close. A log handler writes each record with one Write,
// so lines are never split or interleaved. Writing every line as it is
// logged costs a write system call per line (and, on a pipe, a wake-up
// of the reader per line): for the access log, one per request.
//
// What is held is lost if the process dies without Close (a crash, a
// kill): at most an interval of lines. FlushAt writes warnings and errors
// at once, with every line before them.
type Buffered struct {
	w        io.Writer
	interval time.Duration
	clock    clock.Clock

	mu     sync.Mutex
	buf    []byte
	timer  clock.Timer // armed while lines are held
	closed bool
}

// NewBuffered returns the output to w, holding lines for at most interval
// on clk (the wall clock when nil).
func NewBuffered(w io.Writer, interval time.Duration, clk clock.Clock) *Buffered {
	return &Buffered{w: w, interval: interval, clock: clock.Or(clk)}
}

// Write holds one line (or writes it through, after Close or when it
// alone is larger than maxHeld). It reports the destination's error only
// for a write it made.
func (b *Buffered) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > maxHeld {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	if b.closed || len(p) > maxHeld {
		return b.w.Write(p)
	}
	if b.buf == nil {
		b.buf = make([]byte, 0, maxHeld) // never grown: a line that would not fit flushes first
	}
	b.buf = append(b.buf, p...)
	if b.timer == nil {
		b.timer = b.clock.AfterFunc(b.interval, b.flushFromTimer)
	}
	return len(p), nil
}

// Flush writes the lines held.
func (b *Buffered) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

// Close writes the lines held; later lines are written as they come.
func (b *Buffered) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.flushLocked()
}

func (b *Buffered) flushFromTimer() { _ = b.Flush() }

func (b *Buffered) flushLocked() error {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// FlushAt wraps h so that a record at level or above is written at once,
// with every line held before it: a warning or an error is never waiting
// in a buffer when the process dies.
func FlushAt(h slog.Handler, level slog.Leveler, out *Buffered) slog.Handler {
	return &flushAt{Handler: h, level: level, out: out}
}

type flushAt struct {
	slog.Handler
	level slog.Leveler
	out   *Buffered
}

func (f *flushAt) Handle(ctx context.Context, r slog.Record) error {
	err := f.Handler.Handle(ctx, r)
	if r.Level >= f.level.Level() {
		if ferr := f.out.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (f *flushAt) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &flushAt{Handler: f.Handler.WithAttrs(attrs), level: f.level, out: f.out}
}

func (f *flushAt) WithGroup(name string) slog.Handler {
	return &flushAt{Handler: f.Handler.WithGroup(name), level: f.level, out: f.out}
}
