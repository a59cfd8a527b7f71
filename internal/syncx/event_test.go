package syncx

import (
	"sync"
	"testing"
)

func TestEventFiresOnce(t *testing.T) {
	e := NewEvent()
	if e.HasFired() {
		t.Fatal("a new event has fired")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	for range 50 {
		wg.Go(func() {
			if e.Fire() {
				mu.Lock()
				fired++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-e.Done()
	if fired != 1 || !e.HasFired() {
		t.Fatalf("Fire reported %d firings", fired)
	}
}
