package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/iopgw/iop/internal/clock"
)

// reloadPolicy is when a running process re-reads its configuration file:
// always on SIGHUP; also when the file's content changes, if watch is on
// (polled, which also sees Kubernetes ConfigMap updates).
type reloadPolicy struct {
	Watch    bool          `koanf:"watch"`
	Interval time.Duration `koanf:"interval"`
}

// watchReloads calls reload on SIGHUP and, with p.Watch, when path's
// content changed and then stayed the same for one interval, until the
// returned stop is called (stop waits for the watcher to end). reload
// logs its own outcome. Without a file, SIGHUP is logged and ignored (it
// never kills the process). SIGHUP is caught before watchReloads returns:
// one sent the moment the process says it is up is never lost.
func watchReloads(ctx context.Context, path string, p reloadPolicy, log *slog.Logger, reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		watchFile(ctx, path, p, clock.Real, log, hup, reload)
	}()
	return func() { cancel(); <-done }
}

// watchFile is watchReloads with its clock (the watch ticks') and SIGHUP
// channel given.
func watchFile(ctx context.Context, path string, p reloadPolicy, clk clock.Clock, log *slog.Logger, hup <-chan os.Signal, reload func()) {
	var tick <-chan struct{}
	last := fileSum(path)
	var pending []byte // a changed content seen once, reloaded when the next tick sees it unchanged
	watch := p.Watch && path != ""
	if p.Interval <= 0 {
		p.Interval = 2 * time.Second
	}
	var t clock.Timer // the armed tick's
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if watch && tick == nil {
			tick, t = clock.After(clk, p.Interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if path == "" {
				log.Warn("SIGHUP ignored: no configuration file to reload")
				continue
			}
			last = fileSum(path)
			reload()
		case <-tick:
			tick = nil
			// A change is acted on once the file has held it for a whole
			// interval: a file caught halfway through a non-atomic write
			// is never loaded (the write goes on, the content moves).
			switch sum := fileSum(path); {
			case sum == nil || bytes.Equal(sum, last):
				pending = nil
			case bytes.Equal(sum, pending):
				last, pending = sum, nil
				reload()
			default:
				pending = sum
			}
		}
	}
}

func fileSum(path string) []byte {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(b)
	return s[:]
}
