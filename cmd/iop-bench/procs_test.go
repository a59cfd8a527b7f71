package main

import (
	"os"
	"testing"
	"time"
)

// TestThreadsTimeCountsThisProcess: the threads' CPU time (nanoseconds)
// follows the CPU this process spends, and agrees with the kernel's
// coarser user+system ticks.
func TestThreadsTimeCountsThisProcess(t *testing.T) {
	pid := os.Getpid()
	d0, ok := threadsTime(pid)
	if !ok {
		t.Skip("no per-thread schedstat on this kernel: cpuTime uses /proc/<pid>/stat")
	}
	ticks0 := statTime(pid)
	x := 0
	deadline := time.Now().Add(10 * time.Second)
	for d, _ := threadsTime(pid); d-d0 < 300*time.Millisecond && time.Now().Before(deadline); d, _ = threadsTime(pid) {
		for i := range 1_000_000 {
			x += i
		}
	}
	d1, _ := threadsTime(pid)
	ticks1 := statTime(pid)
	spent, counted := d1-d0, ticks1-ticks0
	if spent < 300*time.Millisecond || counted < spent/2 || counted > spent*2 {
		t.Fatalf("threads' time rose by %v, the process's ticks by %v (x=%d)", spent, counted, x)
	}
	if got := cpuTime(pid); got < d1 {
		t.Fatalf("cpuTime %v below the threads' sum %v", got, d1)
	}
}
