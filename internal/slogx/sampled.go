// Package slogx holds the edge's log helpers beyond log/slog.
package slogx

import (
	"log/slog"
	"sync"
	"time"
)

// Sampled writes at most one record per interval per message; the
// next record says how many were suppressed. For lines an attacker can
// cause at will (refused connections and authentications).
type Sampled struct {
	log      *slog.Logger
	interval time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	skip map[string]int
}

// NewSampled returns a sampled logger writing to log.
func NewSampled(log *slog.Logger, interval time.Duration) *Sampled {
	return &Sampled{log: log, interval: interval, last: map[string]time.Time{}, skip: map[string]int{}}
}

// Warn logs msg unless it was logged less than an interval ago.
func (s *Sampled) Warn(msg string, args ...any) {
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.last[msg]) < s.interval {
		s.skip[msg]++
		s.mu.Unlock()
		return
	}
	suppressed := s.skip[msg]
	s.last[msg], s.skip[msg] = now, 0
	s.mu.Unlock()
	s.log.Warn(msg, append(args, "suppressed_since_last", suppressed)...)
}
