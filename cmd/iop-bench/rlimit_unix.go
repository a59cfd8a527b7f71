//go:build unix

package main

import (
	"fmt"
	"os"
	"slices"
	"syscall"
)

// fitOpenStreams returns the held-stream counts this run can measure.
// The floor holds two descriptors a stream (the client's connection and
// the upstream's), so n streams need 2n and some to spare in each
// process. The limit is raised for this process and, by inheritance,
// for every system it starts (a root user may raise the hard limit
// too); a count still above what the limit allows is lowered to fit, and
// said on stderr.
func fitOpenStreams(counts []int) []int {
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return counts
	}
	want := uint64(descriptorsFor(most))
	if lim.Cur < want {
		raised := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) != nil {
			raised = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
			_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised)
		}
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	return fitCounts(counts, int(min(lim.Cur, 1<<30)))
}

// descriptorsFor is what n held streams need in the process holding the
// most of them.
func descriptorsFor(n int) int { return 2*n + 1024 }

// fitCounts lowers each count above what limit descriptors allow.
func fitCounts(counts []int, limit int) []int {
	out := make([]int, 0, len(counts))
	for _, n := range counts {
		if descriptorsFor(n) > limit {
			fit := max((limit-1024)/2, 0)
			if fit >= 1000 {
				fit = fit / 1000 * 1000
			}
			fmt.Fprintf(os.Stderr, "held streams: %d need %d descriptors, the limit is %d: measuring %d\n", n, descriptorsFor(n), limit, fit)
			n = fit
		}
		if n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
