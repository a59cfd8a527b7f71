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

	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/clocktest"
)

// TestWatchReloadsOnlyAStableFile (issue 31, finding 8): reload.watch acts
// on a change only once the file kept it for a whole interval, so a file
// caught in the middle of a non-atomic write is never loaded.
func TestWatchReloadsOnlyAStableFile(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "gateway.yaml")
		write := func(s string) {
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("complete: 1\n")
		var reloads atomic.Int32
		clk := clocktest.New()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchFile(ctx, path, reloadPolicy{Watch: true, Interval: time.Second}, clk, slog.New(slog.DiscardHandler), make(chan os.Signal), func() { reloads.Add(1) })
		}()
		tick := func() { // one interval on the watcher's clock, and the watcher's look at the file
			synctest.Wait()
			clk.Advance(time.Second)
			synctest.Wait()
		}
		write("compl") // a writer halfway through
		tick()
		write("complete: 2\n") // the write finished: a tick has seen the partial content
		tick()
		if n := reloads.Load(); n != 0 {
			t.Fatalf("reloaded %d times while the file was changing", n)
		}
		tick() // one whole interval unchanged
		if n := reloads.Load(); n != 1 {
			t.Fatalf("reloaded %d times once the file was stable, want 1", n)
		}
		for range 5 {
			tick()
		}
		if n := reloads.Load(); n != 1 {
			t.Fatalf("an unchanged file reloaded again: %d", n)
		}
		cancel()
		<-done
	})
}
