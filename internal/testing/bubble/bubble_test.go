package bubble

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExpiredTimerChannelsBesideFiringTimers is the pattern that kills a
// race-enabled test binary in a plain synctest.Test (a SIGSEGV or a
// ThreadSanitizer CHECK within a fraction of a second on two cores):
// goroutines receive from timer channels whose time has passed — the
// receiver runs the timer — while other timers of the bubble fire.
func TestExpiredTimerChannelsBesideFiringTimers(t *testing.T) {
	const rounds, workers, ticks = 40, 8, 200
	for range rounds {
		Test(t, func(t *testing.T) {
			fired := make(chan int, workers)
			for range workers {
				go func() {
					n := 0
					for range ticks {
						tm := time.NewTimer(time.Millisecond)
						time.Sleep(2 * time.Millisecond)
						<-tm.C
						time.AfterFunc(time.Microsecond, func() {})
						n++
					}
					fired <- n
				}()
			}
			for range workers {
				if n := <-fired; n != ticks {
					t.Fatalf("a worker received %d of %d timers", n, ticks)
				}
			}
		})
	}
}

// TestEveryBubbleGoesThroughHere fails on a call of synctest.Test or
// synctest.Run anywhere in the module but this package: such a bubble
// would run with every P and could bring the race detector down.
func TestEveryBubbleGoesThroughHere(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path == self || name == "node_modules" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		for _, call := range directBubbles(t, path) {
			t.Errorf("%s: synctest.%s; use bubble.Test (the race detector's fault, see the package doc)", call.pos, call.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s: not the module", files, root)
	}
}

type bubbleCall struct {
	pos  token.Position
	name string
}

// directBubbles lists the calls of testing/synctest's Test and Run in a
// file, under whatever name the file imports the package.
func directBubbles(t *testing.T, path string) []bubbleCall {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "testing/synctest" {
			name := "synctest"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	var calls []bubbleCall
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] && (sel.Sel.Name == "Test" || sel.Sel.Name == "Run") {
			calls = append(calls, bubbleCall{fset.Position(sel.Pos()), sel.Sel.Name})
		}
		return true
	})
	return calls
}
