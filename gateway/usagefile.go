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

// restore loads a snapshot: configured keys get their usage back, and
// keys not configured now are kept absent with theirs (a key put back by
// a later reload finds its budget windows).
func (t *tenants) restore(s usageSnapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, r := range s.Keys {
		tn := t.keys[id]
		if tn == nil {
			tn = &tenant{cfg: KeyConfig{ID: id}}
			t.keys[id] = tn
		}
		tn.usage, tn.day, tn.month = r.Usage, r.Day, r.Month
	}
}

// usageSaveInterval is how often the usage file is written: a process
// killed without its shutdown (SIGKILL, a crash) loses at most this much
// usage. The shared store (auth.limits_store) loses none.
const usageSaveInterval = 5 * time.Second

// checkUsagePath refuses a usage file that is a symbolic link: the
// atomic rename would replace the link with a file, and the usage would
// silently stop reaching where the link pointed.
func checkUsagePath(path string) error {
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link; name the file itself (the usage file is replaced by an atomic rename)", path)
	}
	return nil
}

// loadUsage reads path into t; a missing file is a first start.
func (t *tenants) loadUsage(path string) error {
	if err := checkUsagePath(path); err != nil {
		return err
	}
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

// saveUsage writes t's snapshot to path durably and atomically: a
// temporary file in the same directory, fsynced, renamed over path, and
// the directory fsynced, so a crash leaves the old file or the new one,
// never a torn one.
func (t *tenants) saveUsage(path string) error {
	if err := checkUsagePath(path); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t.snapshot(), "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".usage-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// keepUsage saves the usage file every interval until ctx ends (the
// last save is closeTenancy's, after the drain).
func (g *Gateway) keepUsage(ctx context.Context, path string, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := g.tenants.saveUsage(path); err != nil {
				g.log.Warn("saving the usage file failed; retrying", "error", err.Error())
			}
		}
	}
}
