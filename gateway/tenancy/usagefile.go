package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	Usage KeyUsage `json:"usage"`
	Day   Window   `json:"day"`
	Month Window   `json:"month"`
}

// snapshot captures every key's usage.
func (t *Tenants) snapshot() usageSnapshot {
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
func (t *Tenants) restore(s usageSnapshot) {
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

// UsageSaveInterval is how often the usage file is written: a process
// killed without its shutdown (SIGKILL, a crash) loses at most this much
// usage. The shared store (auth.limits_store) loses none.
const UsageSaveInterval = 5 * time.Second

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
func (t *Tenants) LoadUsage(path string) error {
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
func (t *Tenants) SaveUsage(path string) error {
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

// KeepUsage saves the usage file every UsageSaveInterval until ctx ends
// (the last save is the owner's, after its drain: SaveUsage).
func (t *Tenants) KeepUsage(ctx context.Context, path string, log *slog.Logger) {
	tick := time.NewTicker(UsageSaveInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.SaveUsage(path); err != nil {
				log.Warn("saving the usage file failed; retrying", "error", err.Error())
			}
		}
	}
}
