package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/streamgate"
	"github.com/iopgw/iop/wire"
)

func ad(id string, capacity int32, models ...string) *wire.ProviderAdvertisement {
	return &wire.ProviderAdvertisement{ProviderId: id, Adapter: "sim", Target: models[0], InstanceKey: "sim/" + id, Models: models,
		Capacity: capacity, ResponseStallTimeoutMs: 300000, ExecutionPath: "normalized", SupportsTunnel: true}
}

func testPool(maxLen int, maxWait time.Duration) *Pool {
	return NewPool(PoolConfig{Queue: func(string) QueueConfig { return QueueConfig{MaxLength: maxLen, MaxWait: maxWait} }})
}

func TestPoolSelectionAndAvoidance(t *testing.T) {
	p := testPool(8, time.Second)
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 2, "m"), ad("b", 2, "m")})
	ctx := context.Background()
	tests := []struct {
		name     string
		req      ProviderPoolDispatchRequest
		wantErr  error
		wantOnly string
	}{
		{"zero hints pick any", ProviderPoolDispatchRequest{Model: "m"}, nil, ""},
		{"avoid a picks b", ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a"}, nil, "n1/b"},
		{"avoid b picks a", ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/b", AllowAvoidedProviderFallback: true}, nil, "n1/a"},
		{"unknown model", ProviderPoolDispatchRequest{Model: "x"}, streamgate.ErrNoProvider, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := p.Acquire(ctx, tt.req)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if l == nil {
				return
			}
			defer l.Release()
			if tt.wantOnly != "" && l.ProviderID != tt.wantOnly {
				t.Fatalf("picked %s, want %s", l.ProviderID, tt.wantOnly)
			}
		})
	}
	// Only the avoided provider left: fallback needs explicit permission.
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 2, "m")})
	if _, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a"}); !errors.Is(err, streamgate.ErrNoProvider) {
		t.Fatalf("avoided-only without permission: %v", err)
	}
	l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a", AllowAvoidedProviderFallback: true})
	if err != nil || l.ProviderID != "n1/a" {
		t.Fatalf("avoided-only with permission: %v %v", l, err)
	}
	l.Release()
	if c := p.Candidates(ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a"}); c.Alternates != 0 || !c.AvoidedOnly {
		t.Fatalf("candidates %+v", c)
	}
}

func TestPoolLeastLoadedThenPriority(t *testing.T) {
	p := NewPool(PoolConfig{Policy: func(id string) ProviderPolicy {
		if id == "n1/b" {
			return ProviderPolicy{ID: id, Priority: 5}
		}
		return ProviderPolicy{}
	}})
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 4, "m"), ad("b", 4, "m")})
	l1, _ := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "m"})
	if l1.ProviderID != "n1/b" {
		t.Fatalf("equal load: picked %s, want the higher priority", l1.ProviderID)
	}
	l2, _ := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "m"})
	if l2.ProviderID != "n1/a" {
		t.Fatalf("b busier: picked %s, want a", l2.ProviderID)
	}
	l1.Release()
	l2.Release()
}

// TestPoolQueueFIFOTimeoutAndCancel, in fake time: waiters are served
// in order, the queue bound refuses a third, the wait bound times out at
// exactly max_wait, and a cancelled waiter is never served.
func TestPoolQueueFIFOTimeoutAndCancel(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		p := testPool(2, 300*time.Millisecond)
		p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 1, "m")})
		ctx := context.Background()
		held, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan int, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"})
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				order <- i
				l.Release()
			})
			synctest.Wait()
			if p.QueueDepth("m") != i+1 {
				t.Fatalf("queue depth %d after waiter %d", p.QueueDepth("m"), i)
			}
		}
		if _, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"}); !errors.Is(err, streamgate.ErrQueueFull) {
			t.Fatalf("third waiter: %v, want ErrQueueFull", err)
		}
		held.Release()
		wg.Wait()
		if a, b := <-order, <-order; a != 0 || b != 1 {
			t.Fatalf("served %d then %d, want FIFO", a, b)
		}
		// Timeout.
		held, _ = p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"})
		start := time.Now()
		if _, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"}); !errors.Is(err, streamgate.ErrQueueTimeout) || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("timeout: %v after %v", err, time.Since(start))
		}
		// Cancel while queued: never served, slot not lost.
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := p.Acquire(cctx, ProviderPoolDispatchRequest{Model: "m"}); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		held.Release()
		if p.InUse() != 0 || p.QueueDepth("m") != 0 {
			t.Fatalf("in use %d, queued %d", p.InUse(), p.QueueDepth("m"))
		}
	})
}

// TestQueuedReResolutionUsesAvoidance: a queued request keeps its
// avoidance filter when slots free up.
func TestQueuedReResolutionUsesAvoidance(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		p := testPool(8, 2*time.Second)
		p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 1, "m"), ad("b", 1, "m")})
		ctx := context.Background()
		la, _ := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/b"})
		lb, _ := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"})
		if la.ProviderID != "n1/a" || lb.ProviderID != "n1/b" {
			t.Fatal(la.ProviderID, lb.ProviderID)
		}
		got := make(chan string, 1)
		go func() {
			l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a"})
			if err != nil {
				got <- err.Error()
				return
			}
			got <- l.ProviderID
			l.Release()
		}()
		synctest.Wait()
		la.Release() // frees the avoided provider: the waiter must not take it
		synctest.Wait()
		select {
		case id := <-got:
			t.Fatalf("waiter took %s after the avoided provider freed", id)
		default:
		}
		lb.Release()
		if id := <-got; id != "n1/b" {
			t.Fatalf("waiter got %s", id)
		}
	})
}

// TestLeaseProperty drives random interleavings of acquire, release
// (complete, cancel, error), double release, node loss and reconnection,
// queue waits and cancellations: in-use slots return to zero, a second
// release never takes effect, and every started attempt ends exactly once.
// It runs in fake time, so queue timeouts cost nothing.
func TestLeaseProperty(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		for seed := range uint64(10000) {
			leasePropertyRun(t, seed)
		}
	})
}

func leasePropertyRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	p := testPool(4, time.Millisecond)
	gen := uint64(1)
	p.SetNode("n1", gen, []*wire.ProviderAdvertisement{ad("a", 2, "m"), ad("b", 1, "m")})
	var live []*Lease
	started, ended := 0, 0
	for range 40 {
		switch op := r.IntN(6); op {
		case 0, 1:
			ctx, cancel := context.WithCancel(context.Background())
			if r.IntN(4) == 0 {
				cancel()
			}
			l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: []string{"", "n1/a"}[r.IntN(2)], AllowAvoidedProviderFallback: r.IntN(2) == 0})
			cancel()
			if err == nil {
				live = append(live, l)
				started++
			}
		case 2, 3:
			if len(live) > 0 {
				i := r.IntN(len(live))
				if !live[i].Release() {
					t.Fatalf("seed %d: first release refused", seed)
				}
				if live[i].Release() {
					t.Fatalf("seed %d: second release took effect", seed)
				}
				live = append(live[:i], live[i+1:]...)
				ended++
			}
		case 4: // node loss and reconnect: old leases still release once
			p.RemoveNode("n1", gen)
			gen++
			p.SetNode("n1", gen, []*wire.ProviderAdvertisement{ad("a", 2, "m"), ad("b", 1, "m")})
		case 5: // stale cleanup of an older generation is a no-op
			p.RemoveNode("n1", gen-1)
		}
	}
	for _, l := range live {
		l.Release()
		ended++
	}
	if started != ended {
		t.Fatalf("seed %d: %d started, %d ended", seed, started, ended)
	}
	if n := p.InUse(); n != 0 {
		t.Fatalf("seed %d: %d slots still in use", seed, n)
	}
	if len(p.Snapshot()) != 2 {
		t.Fatalf("seed %d: stale cleanup removed the current generation", seed)
	}
}

func TestRemoveNodeIsGenerationScoped(t *testing.T) {
	p := testPool(8, time.Second)
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 1, "m")})
	p.SetNode("n1", 2, []*wire.ProviderAdvertisement{ad("a", 1, "m")})
	p.RemoveNode("n1", 1) // the old connection's late cleanup
	snap := p.Snapshot()
	if len(snap) != 1 || snap[0].ConnectionGeneration != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	p.RemoveNode("n1", 2)
	if len(p.Snapshot()) != 0 {
		t.Fatal(fmt.Sprint(p.Snapshot()))
	}
}

// TestPoolRoutesBySurfaceAndOllamaNames: path auto admits a tunnel-only
// request only on a provider that serves its surface natively, and an
// Ollama provider's "llama3.2" answers "llama3.2:latest" (and the reverse)
// under the name it advertised.
func TestPoolRoutesBySurfaceAndOllamaNames(t *testing.T) {
	p := testPool(8, time.Second)
	chat := ad("chat", 2, "m")
	chat.Adapter, chat.ExecutionPath, chat.Surfaces = "openai", pathAuto, []string{"chat"}
	resp := ad("resp", 2, "m")
	resp.Adapter, resp.ExecutionPath, resp.Surfaces = "openai", pathAuto, []string{"chat", "responses"}
	ol := ad("ol", 2, "llama3.2", "qwen3:8b")
	ol.Adapter, ol.ExecutionPath, ol.Surfaces = "ollama", pathAuto, []string{"ollama", "embeddings"}
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{chat, resp, ol})
	ctx := context.Background()
	for range 4 {
		l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", Need: streamgate.NeedTunnel, Surface: "responses"})
		if err != nil || l.ProviderID != "n1/resp" || !l.Tunnels("responses") {
			t.Fatalf("responses went to %v (%v)", l, err)
		}
		l.Release()
	}
	if !p.Tunnels("m", "responses") || p.Tunnels("llama3.2", "responses") {
		t.Fatal("Tunnels")
	}
	ol.SupportsOllamaApi = true
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{chat, resp, ol})
	if !p.SpeaksOllama("llama3.2:latest") || p.SpeaksOllama("m") {
		t.Fatal("SpeaksOllama")
	}
	if _, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m", Need: streamgate.NeedOllamaAPI}); !errors.Is(err, streamgate.ErrNoProvider) {
		t.Fatalf("an Ollama API request for a model no Ollama serves: %v", err)
	}
	for model, want := range map[string]string{"llama3.2:latest": "llama3.2", "llama3.2": "llama3.2", "qwen3:8b": "qwen3:8b", "qwen3": ""} {
		l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: model})
		if want == "" {
			if !errors.Is(err, streamgate.ErrNoProvider) {
				t.Fatalf("%s: %v", model, err)
			}
			continue
		}
		if err != nil || l.Target != want || l.Model != model {
			t.Fatalf("%s: lease %+v (%v)", model, l, err)
		}
		l.Release()
	}
}

// TestReadvertisementKeepsLeaseAccounting: a re-advertisement of the same
// generation updates providers in place, so a lease taken before it
// releases the slot it took (no capacity leak) and outlier state stays.
func TestReadvertisementKeepsLeaseAccounting(t *testing.T) {
	p := testPool(0, time.Millisecond)
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 1, "m")})
	ctx := context.Background()
	l, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.providers[l.slot.key].outlier.streak = 3
	p.mu.Unlock()
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 1, "m", "m2")})
	l.Release()
	for range 3 {
		l2, err := p.Acquire(ctx, ProviderPoolDispatchRequest{Model: "m2"})
		if err != nil {
			t.Fatalf("capacity leaked across a re-advertisement: %v", err)
		}
		l2.Release()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.providers[l.slot.key]; pp.outlier.streak != 3 || pp.inFlight != 0 {
		t.Fatalf("provider state after re-advertisement: %+v", pp)
	}
}

// TestAliasWeights: an alias's targets share its requests by weight
// (smooth weighted round robin while they are equally loaded), each lease
// naming the provider's own model.
func TestAliasWeights(t *testing.T) {
	targets := []ModelTarget{{Provider: "n1/a", Model: "model-a", Weight: 3}, {Provider: "n1/b", Model: "model-b", Weight: 1}}
	p := NewPool(PoolConfig{Aliases: func(m string) []ModelTarget {
		if m == "team" {
			return targets
		}
		return nil
	}})
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 4, "model-a"), ad("b", 4, "model-b"), ad("c", 4, "model-c")})
	got := map[string]int{}
	var seq []string
	for range 400 {
		l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "team"})
		if err != nil {
			t.Fatal(err)
		}
		got[l.ProviderID+"="+l.Target]++
		if len(seq) < 8 {
			seq = append(seq, l.LocalProviderID)
		}
		l.Release()
	}
	if got["n1/a=model-a"] != 300 || got["n1/b=model-b"] != 100 || len(got) != 2 {
		t.Fatalf("distribution %v, want 300:100 on the targets only", got)
	}
	// Interleaved, not in runs: every 4 picks in a row hold 3 a's.
	for i := 0; i+4 <= len(seq); i++ {
		if n := strings.Count(strings.Join(seq[i:i+4], ""), "a"); n != 3 {
			t.Fatalf("picks not interleaved: %v", seq)
		}
	}
	if !p.Known("team") || p.Known("nobody") {
		t.Fatal("alias knowledge")
	}
}

// The candidate lists a dispatch builds are the pool's reused room: after
// the first, working out who could serve a request allocates nothing —
// and the lists answer as before, one dispatch after another.
func TestCandidateListsAreReused(t *testing.T) {
	p := testPool(8, time.Second)
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("a", 2, "m"), ad("b", 2, "m"), ad("c", 2, "m", "z")})
	req := ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/a"}
	if c := p.Candidates(req); c.Alternates != 2 || c.AvoidedOnly {
		t.Fatalf("candidates %+v", c)
	}
	if n := testing.AllocsPerRun(100, func() { p.Candidates(req) }); n != 0 {
		t.Fatalf("%v allocations a dispatch's candidate lists", n)
	}
	if c := p.Candidates(ProviderPoolDispatchRequest{Model: "z"}); c.Alternates != 1 {
		t.Fatalf("candidates for z after m's %+v", c)
	}
	if c := p.Candidates(req); c.Alternates != 2 {
		t.Fatalf("candidates for m after z's %+v", c)
	}
}
