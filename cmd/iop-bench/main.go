// Command iop-bench measures iop against a direct connection, a naive Go
// reverse proxy and a peer gateway, in one run, on 127.0.0.1:
//
//	iop-bench upstream -addr 127.0.0.1:0        # the fast fake OpenAI upstream
//	iop-bench proxy -addr ... -upstream URL     # the naive httputil.ReverseProxy
//	iop-bench run [-quick] [-out docs/benchmarks.md]
//	iop-bench load -url URL -model M [-stream] [-c N] [-n N] [-pad BYTES]   # one ad-hoc load run
//	iop-bench load -url URL -model hold-60 -hold N   # hold N open streams until interrupted
//
// `run` starts every system as its own process, interleaves them with
// rotating order, repeats each measurement, and reports medians: latency,
// throughput, CPU time per request and per SSE chunk (from /proc), RSS and
// memory per open stream, and truncated streams (which must be zero).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: iop-bench upstream|proxy|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "upstream":
		err = runUpstream(ctx, os.Args[2:])
	case "proxy":
		err = runProxy(ctx, os.Args[2:])
	case "run":
		err = runBench(ctx, os.Args[2:])
	case "load":
		err = runAdhoc(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "iop-bench:", err)
		os.Exit(1)
	}
}
