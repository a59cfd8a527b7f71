package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// scenario measures one thing on one variant.
type scenario struct {
	name string
	run  func(ctx context.Context, v variant, r results)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func scenarios(pl plan, chunks int) []scenario {
	out := []scenario{latency(pl), throughput(pl, 16, "cpu_us_per_req"), throughput(pl, 64, "cpu_us_per_req64"), streams64(pl, chunks)}
	out = append(out, growth(pl, chunks)...)
	if pl.streamRequests256 > 0 {
		out = append(out, streams256(pl, chunks))
	}
	if len(pl.sweep) > 0 {
		out = append(out, sweep(pl))
	}
	return out
}

// latency: one request at a time.
func latency(pl plan) scenario {
	return scenario{"latency c=1", func(ctx context.Context, v variant, r results) {
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{concurrency: 1, requests: pl.latRequests})
		r.add(v.label, "lat_p50_ms", ms(percentile(res.latency, 0.5)))
		r.add(v.label, "lat_p99_ms", ms(percentile(res.latency, 0.99)))
		r.add(v.label, "errors", float64(res.errors))
	}}
}

// throughput: JSON requests from c clients for the plan's duration, and
// the system's CPU a request (cpuKey).
func throughput(pl plan, c int, cpuKey string) scenario {
	return scenario{fmt.Sprintf("throughput c=%d", c), func(ctx context.Context, v variant, r results) {
		before := v.sys.cpu()
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{concurrency: c, duration: pl.thrDuration})
		cpu := v.sys.cpu() - before
		r.add(v.label, fmt.Sprintf("rps%d", c), float64(len(res.latency))/res.elapsed.Seconds())
		if n := len(res.latency); n > 0 && len(v.sys.procs) > 0 {
			r.add(v.label, cpuKey, float64(cpu)/1e3/float64(n))
		}
		r.add(v.label, "errors", float64(res.errors))
	}}
}

// streams64: streams from 64 clients: the time to their first token,
// the gaps between chunks, and the system's CPU a chunk.
func streams64(pl plan, chunks int) scenario {
	return scenario{"streams c=64", func(ctx context.Context, v variant, r results) {
		before := v.sys.cpu()
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{stream: true, concurrency: 64, requests: pl.streamRequests64, chunks: chunks})
		cpu := v.sys.cpu() - before
		r.add(v.label, "ttft64_p50_ms", ms(percentile(res.ttft, 0.5)))
		r.add(v.label, "ttft64_p99_ms", ms(percentile(res.ttft, 0.99)))
		r.add(v.label, "gap_p50_ms", ms(percentile(res.gaps, 0.5)))
		r.add(v.label, "gap_p99_ms", ms(percentile(res.gaps, 0.99)))
		if res.chunks > 0 && len(v.sys.procs) > 0 {
			r.add(v.label, "cpu_us_per_chunk", float64(cpu)/1e3/float64(res.chunks))
			r.add(v.label, "cpu_us_per_stream", float64(cpu)/1e3/float64(res.requests))
		}
		r.add(v.label, "truncated", float64(res.truncated))
		r.add(v.label, "streams", float64(res.requests))
		r.add(v.label, "errors", float64(res.errors))
	}}
}

// streams256: the time to the first token from 256 clients.
func streams256(pl plan, chunks int) scenario {
	return scenario{"streams c=256", func(ctx context.Context, v variant, r results) {
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{stream: true, concurrency: 256, requests: pl.streamRequests256, chunks: chunks})
		r.add(v.label, "ttft256_p50_ms", ms(percentile(res.ttft, 0.5)))
		r.add(v.label, "ttft256_p99_ms", ms(percentile(res.ttft, 0.99)))
		r.add(v.label, "truncated", float64(res.truncated))
		r.add(v.label, "streams", float64(res.requests))
	}}
}

// sweep: open-loop rates, and the highest whose p99 latency stays
// within 5, 10 and 50 ms without errors.
func sweep(pl plan) scenario {
	return scenario{"open-loop sweep", func(ctx context.Context, v variant, r results) {
		best := map[int]float64{5: 0, 10: 0, 50: 0}
		for _, rate := range pl.sweep {
			res := runLoad(ctx, v.sys.targets[v.key], loadSpec{concurrency: 256, rate: rate, duration: pl.sweepDuration})
			p99 := ms(percentile(res.latency, 0.99))
			for limit := range best {
				if res.errors == 0 && p99 <= float64(limit) && rate > best[limit] {
					best[limit] = rate
				}
			}
		}
		for limit, rate := range best {
			r.add(v.label, fmt.Sprintf("rps_p99_le_%dms", limit), rate)
		}
	}}
}

// memoryPerStream opens N streams held by the upstream and charges the
// system's RSS growth to them. Each N is measured on a fresh instance of
// the system (warmed up with a few requests), since a Go or Node process
// rarely returns memory an earlier scenario grew into.
func memoryPerStream(ctx context.Context, v variant, pl plan, r results) {
	if len(v.sys.procs) == 0 || v.sys.fresh == nil {
		return
	}
	for _, n := range pl.openStreams {
		sys, err := v.sys.fresh(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: fresh instance: %v\n", v.label, err)
			return
		}
		t, ok := sys.targets["hold-"+v.key]
		if !ok {
			sys.stop()
			return
		}
		runLoad(ctx, sys.targets[v.key], loadSpec{concurrency: 8, requests: 64})
		time.Sleep(500 * time.Millisecond)
		before, _ := sys.mem()
		stop, err := holdStreams(ctx, t, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %d open streams: %v\n", v.label, n, err)
			sys.stop()
			continue
		}
		after, _ := sys.mem()
		stop()
		sys.stop()
		r.add(v.label, fmt.Sprintf("kib_per_stream_%d", n), float64(after-before)/float64(n))
	}
}

// truncationRun pushes many streams through each iop path and counts any
// that arrive without every chunk, usage and [DONE].
func truncationRun(ctx context.Context, vs []variant, pl plan, chunks int, r results) {
	for _, v := range vs {
		if v.sys.name != "iop dev" {
			continue
		}
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{stream: true, concurrency: 128, requests: pl.truncationStreams, chunks: chunks})
		r.add(v.label, "soak_streams", float64(res.requests))
		r.add(v.label, "soak_truncated", float64(res.truncated+res.errors))
	}
}

// growth are the scenarios of how cost grows: CPU per chunk from one to a
// thousand concurrent streams, 1 MiB request bodies, and a node serving
// 50 models (its tunnel provider's middle model).
func growth(pl plan, chunks int) []scenario {
	var out []scenario
	for _, c := range pl.scale {
		out = append(out, scenario{fmt.Sprintf("streams c=%d", c), func(ctx context.Context, v variant, r results) {
			before := v.sys.cpu()
			res := runLoad(ctx, v.sys.targets[v.key], loadSpec{stream: true, concurrency: c, requests: max(4*c, 512), chunks: chunks})
			cpu := v.sys.cpu() - before
			if res.chunks > 0 && len(v.sys.procs) > 0 {
				r.add(v.label, fmt.Sprintf("cpu_us_per_chunk_c%d", c), float64(cpu)/1e3/float64(res.chunks))
			}
			r.add(v.label, "truncated", float64(res.truncated))
			r.add(v.label, "streams", float64(res.requests))
			r.add(v.label, "errors", float64(res.errors))
		}})
	}
	out = append(out, scenario{"1 MiB bodies c=8", func(ctx context.Context, v variant, r results) {
		before := v.sys.cpu()
		res := runLoad(ctx, v.sys.targets[v.key], loadSpec{concurrency: 8, requests: pl.bigBodies, padBytes: 1 << 20})
		cpu := v.sys.cpu() - before
		if n := len(res.latency); n > 0 && len(v.sys.procs) > 0 {
			r.add(v.label, "cpu_us_per_req_1mib", float64(cpu)/1e3/float64(n))
		}
		r.add(v.label, "errors", float64(res.errors))
	}})
	out = append(out, scenario{"50-model node c=16", func(ctx context.Context, v variant, r results) {
		// The floor sends the same requests (it has no models: the upstream
		// answers any) at the same place in the run, after the 1 MiB
		// bodies, so that both figures are taken in the same conditions.
		t, ok := v.sys.targets["t50"]
		if !ok || v.key != "t" && v.label != floorLabel {
			return
		}
		before := v.sys.cpu()
		res := runLoad(ctx, t, loadSpec{concurrency: 16, requests: pl.manyModels})
		cpu := v.sys.cpu() - before
		if n := len(res.latency); n > 0 && len(v.sys.procs) > 0 {
			r.add(v.label, "cpu_us_per_req_50models", float64(cpu)/1e3/float64(n))
		}
		r.add(v.label, "errors", float64(res.errors))
	}})
	return out
}
