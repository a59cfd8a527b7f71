package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// usageSnapshot is what the usage file holds: each key's use since the
// file began and its budget windows, so budgets survive a restart.
type usageSnapshot struct {
	Saved time.Time              `json:"saved"`
	Keys  map[string]usageRecord `json:"keys"`
}

type usageRecord struct {
	Usage keyUsage `json:"usage"`
	Day   window   `json:"day"`
	Month window   `json:"month"`
}

// snapshot captures every key's usage.
func (t *tenants) snapshot() usageSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := usageSnapshot{Saved: t.now().UTC(), Keys: map[string]usageRecord{}}
	for id, tn := range t.keys {
		s.Keys[id] = usageRecord{Usage: tn.usage, Day: tn.day, Month: tn.month}
	}
	return s
}

// restore loads a snapshot for the keys still configured.
func (t *tenants) restore(s usageSnapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, r := range s.Keys {
		if tn := t.keys[id]; tn != nil {
			tn.usage, tn.day, tn.month = r.Usage, r.Day, r.Month
		}
	}
}

// loadUsage reads path into t; a missing file is a first start.
func (t *tenants) loadUsage(path string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var s usageSnapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	t.restore(s)
	return nil
}

// saveUsage writes t's snapshot to path atomically (a temporary file
// renamed over it).
func (t *tenants) saveUsage(path string) error {
	b, err := json.MarshalIndent(t.snapshot(), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".usage-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// keepUsage saves the usage file every interval until ctx ends, then
// once more.
func (g *Gateway) keepUsage(ctx context.Context, path string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := g.tenants.saveUsage(path); err != nil {
				g.log.Error("saving the usage file failed", "error", err.Error())
			}
			return
		case <-t.C:
			if err := g.tenants.saveUsage(path); err != nil {
				g.log.Warn("saving the usage file failed; retrying", "error", err.Error())
			}
		}
	}
}
