package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/iopgw/iop/internal/slogx"
)

// newLogger builds the process logger, JSON (production) or text, and
// the level variable a reload changes. With a flush interval its lines
// are held up to that long and written together (slogx.Buffered),
// warnings and errors at once; done writes what is held, and must run
// before the process exits.
func newLogger(w io.Writer, level, format string, flush time.Duration) (log *slog.Logger, lv *slog.LevelVar, done func(), err error) {
	lv = new(slog.LevelVar)
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, nil, nil, fmt.Errorf("log.level: %w", err)
	}
	done = func() {}
	var out *slogx.Buffered
	if flush > 0 {
		out = slogx.NewBuffered(w, flush, nil)
		w, done = out, func() { _ = out.Close() }
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "", "json":
		h = slog.NewJSONHandler(w, opts)
	case "text":
		h = slog.NewTextHandler(w, opts)
	default:
		return nil, nil, nil, fmt.Errorf("log.format: must be json or text, not %q", format)
	}
	if out != nil {
		h = slogx.FlushAt(h, slog.LevelWarn, out)
	}
	return slog.New(h), lv, done, nil
}
