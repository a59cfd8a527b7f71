package syncx

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/iopgw/iop/internal/testing/bubble"
)

// TestWorkersRunEachFunctionOnce: functions handed over from many
// goroutines at once, while the set is closed halfway, each run exactly
// once, and no goroutine is left waiting.
func TestWorkersRunEachFunctionOnce(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		w := NewWorkers(4)
		base := bubbleGoroutines()
		const n = 2000
		var ran [n]atomic.Int32
		var wg sync.WaitGroup
		wg.Add(n)
		for i := range n {
			if i == n/2 {
				go w.Close()
			}
			go w.Go(func() {
				defer wg.Done()
				ran[i].Add(1)
			})
		}
		wg.Wait()
		synctest.Wait()
		for i := range ran {
			if got := ran[i].Load(); got != 1 {
				t.Fatalf("function %d ran %d times", i, got)
			}
		}
		if got, gs := w.Idle(), bubbleGoroutines()-base; got != 0 || gs != 0 {
			t.Fatalf("after Close: %d waiting, %d goroutines left", got, gs)
		}
	})
}

// checkWaiting fails t unless want goroutines of w wait and the process
// runs exactly want goroutines more than base (run in a synctest bubble,
// after synctest.Wait).
func checkWaiting(t *testing.T, w *Workers, base, want int, when string) {
	t.Helper()
	if got, gs := w.Idle(), bubbleGoroutines()-base; got != want || gs != want {
		t.Fatalf("%s: %d waiting, %d goroutines, want %d and %d", when, got, gs, want, want)
	}
}

// TestWorkersRunEachFunctionOnceOpen is the same without Close, with
// the goroutines kept. In a bubble like the others: its kept goroutines
// end with it (the bubble waits for them), not during the next test,
// whose goroutine counts they would change.
func TestWorkersRunEachFunctionOnceOpen(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		w := NewWorkers(4)
		defer w.Close()
		const n = 2000
		var ran [n]atomic.Int32
		var wg sync.WaitGroup
		wg.Add(n)
		for i := range n {
			go w.Go(func() {
				defer wg.Done()
				ran[i].Add(1)
			})
		}
		wg.Wait()
		for i := range ran {
			if got := ran[i].Load(); got != 1 {
				t.Fatalf("function %d ran %d times", i, got)
			}
		}
	})
}

// TestWorkersKeepAGoroutineForTheNext: a goroutine whose function
// returned waits, and runs the next function handed over; functions
// that come one after another never need a second goroutine.
func TestWorkersKeepAGoroutineForTheNext(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		w := NewWorkers(4)
		base := bubbleGoroutines()
		for i := range 5 {
			done := make(chan struct{})
			w.Go(func() { close(done) })
			<-done
			synctest.Wait()
			checkWaiting(t, w, base, 1, fmt.Sprintf("after function %d", i))
		}
		w.Close()
		synctest.Wait()
		checkWaiting(t, w, base, 0, "after Close")
	})
}

// TestWorkersKeepAtMostMaxIdle: of many goroutines whose functions ran
// at once, maxIdle wait afterwards and the others end.
func TestWorkersKeepAtMostMaxIdle(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		w := NewWorkers(3)
		defer w.Close()
		base := bubbleGoroutines()
		release := make(chan struct{})
		for range 10 {
			w.Go(func() { <-release })
		}
		synctest.Wait()
		if gs := bubbleGoroutines() - base; gs != 10 {
			t.Fatalf("%d goroutines for 10 blocked functions", gs)
		}
		close(release)
		synctest.Wait()
		checkWaiting(t, w, base, 3, "after the functions returned")
	})
}

// TestWorkersRunAfterClose: Go after Close still runs the function, on a
// goroutine that ends with it.
func TestWorkersRunAfterClose(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		w := NewWorkers(2)
		w.Close()
		base := bubbleGoroutines()
		done := make(chan struct{})
		w.Go(func() { close(done) })
		<-done
		synctest.Wait()
		checkWaiting(t, w, base, 0, "after a function run past Close")
	})
}

// TestWorkersDropWhatAFunctionHeld: a waiting goroutine does not keep
// what its last function referenced.
func TestWorkersDropWhatAFunctionHeld(t *testing.T) {
	w := NewWorkers(1)
	defer w.Close()
	freed := make(chan struct{})
	big := new([1 << 16]byte)
	runtime.AddCleanup(big, func(ch chan struct{}) { close(ch) }, freed)
	done := make(chan struct{})
	held := big // referenced by the function alone from here
	big = nil
	w.Go(func() { held[0] = 1; close(done) })
	<-done
	for w.Idle() != 1 {
		runtime.Gosched()
	}
	for range 10 {
		runtime.GC()
		select {
		case <-freed:
			return
		default:
		}
	}
	t.Fatal("a waiting goroutine kept its last function's closure alive")
}

// bubbleGoroutines counts the goroutines of the caller's bubble (the
// runtime marks each in a stack dump): runtime.NumGoroutine counts the
// process's, which another test's goroutines, ending meanwhile, change.
func bubbleGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	first, _, _ := bytes.Cut(buf, []byte("\n")) // the caller's own header
	_, id, ok := bytes.Cut(first, []byte("synctest bubble "))
	if !ok {
		panic("bubbleGoroutines: not called in a bubble")
	}
	tag := []byte("synctest bubble " + string(bytes.TrimSuffix(id, []byte("]:"))) + "]")
	n := 0
	for line := range bytes.Lines(buf) {
		if bytes.HasPrefix(line, []byte("goroutine ")) && bytes.Contains(line, tag) {
			n++
		}
	}
	return n
}
