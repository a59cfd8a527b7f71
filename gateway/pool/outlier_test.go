package pool

import (
	"context"
	"testing"
	"time"

	"github.com/iopgw/iop/wire"
)

type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time { return f.t }

// TestOutlierEjection: five consecutive server-side failures eject a
// provider for 30 s, the next ejection lasts 60 s, capped at 300 s; 429s
// and 4xx neither count nor reset; a success resets the streak; an ejected
// provider gets no work while another can take it, and all of them stay
// routable when every one is ejected (panic routing).
func TestOutlierEjection(t *testing.T) {
	clock := &fakeNow{t: time.Unix(1e9, 0)}
	p := NewPool(PoolConfig{Now: clock.now})
	p.SetNode("n1", 1, []*wire.ProviderAdvertisement{ad("x", 8, "m"), ad("y", 8, "m")})
	x := p.providers[ProviderKey{NodeID: "n1", Generation: 1, ProviderID: "x"}]
	y := p.providers[ProviderKey{NodeID: "n1", Generation: 1, ProviderID: "y"}]
	fail := func(pp *pooled, n int) (ejected bool) {
		for range n {
			ejected = p.reportResult(pp, ResultServerFailure) || ejected
		}
		return ejected
	}
	if fail(x, 4) {
		t.Fatal("ejected after 4 failures")
	}
	p.reportResult(x, ResultNeutral) // a 429 in between changes nothing
	if !fail(x, 1) {
		t.Fatal("not ejected after 5 consecutive failures")
	}
	if got := x.outlier.until.Sub(clock.t); got != 30*time.Second {
		t.Fatalf("first ejection %v", got)
	}
	for range 10 {
		l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "m"})
		if err != nil || l.LocalProviderID != "y" {
			t.Fatalf("lease %+v %v while x is ejected", l, err)
		}
		l.Release()
	}
	if c := p.Candidates(ProviderPoolDispatchRequest{Model: "m", AvoidProviderID: "n1/y"}); c.Alternates != 0 || !c.AvoidedOnly {
		t.Fatalf("candidates avoiding y: %+v", c)
	}
	if s := p.Snapshot(); s[0].EjectedUntil == nil && s[1].EjectedUntil == nil {
		t.Fatal("snapshot does not show the ejection")
	}
	// Every provider ejected: panic routing keeps them routable.
	fail(y, 5)
	if l, err := p.Acquire(context.Background(), ProviderPoolDispatchRequest{Model: "m"}); err != nil {
		t.Fatalf("all ejected: %v", err)
	} else {
		l.Release()
	}
	// Back after 30 s; the next ejection is 60 s; the cap is 300 s.
	clock.t = clock.t.Add(31 * time.Second)
	fail(x, 5)
	if got := x.outlier.until.Sub(clock.t); got != 60*time.Second {
		t.Fatalf("second ejection %v", got)
	}
	for range 10 {
		clock.t = x.outlier.until.Add(time.Second)
		fail(x, 5)
	}
	if got := x.outlier.until.Sub(clock.t); got != 300*time.Second {
		t.Fatalf("capped ejection %v", got)
	}
	// A success resets the streak.
	clock.t = x.outlier.until.Add(time.Second)
	fail(x, 4)
	p.reportResult(x, ResultSuccess)
	if fail(x, 4) {
		t.Fatal("the streak survived a success")
	}
}
