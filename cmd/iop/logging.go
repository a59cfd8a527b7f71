package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger builds the process logger, JSON (production) or text, and
// the level variable a reload changes.
func newLogger(w io.Writer, level, format string) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "json":
		return slog.New(slog.NewJSONHandler(w, opts)), lv, nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), lv, nil
	}
	return nil, nil, fmt.Errorf("log.format: must be json or text, not %q", format)
}
