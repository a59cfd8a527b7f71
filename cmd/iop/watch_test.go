package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatchReloadsOnlyAStableFile (issue 31, finding 8): reload.watch acts
// on a change only once the file kept it for a whole interval, so a file
// caught in the middle of a non-atomic write is never loaded.
func TestWatchReloadsOnlyAStableFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "gateway.yaml")
		write := func(s string) {
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("complete: 1\n")
		var reloads atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchFile(ctx, path, reloadPolicy{Watch: true, Interval: time.Second}, slog.New(slog.DiscardHandler), make(chan os.Signal), func() { reloads.Add(1) })
		}()
		time.Sleep(500 * time.Millisecond)
		write("compl") // a writer halfway through
		time.Sleep(time.Second)
		write("complete: 2\n") // the write finished: a tick has seen the partial content
		time.Sleep(time.Second)
		if n := reloads.Load(); n != 0 {
			t.Fatalf("reloaded %d times while the file was changing", n)
		}
		time.Sleep(time.Second) // one whole interval unchanged
		if n := reloads.Load(); n != 1 {
			t.Fatalf("reloaded %d times once the file was stable, want 1", n)
		}
		time.Sleep(5 * time.Second)
		if n := reloads.Load(); n != 1 {
			t.Fatalf("an unchanged file reloaded again: %d", n)
		}
		cancel()
		<-done
	})
}
