package streamgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/bubble"
	"github.com/iopgw/iop/internal/testing/streamcheck"
	"github.com/iopgw/iop/surface"

	"github.com/iopgw/iop/internal/testing/logbuf"
)

// scriptAttempt is one attempt whose behaviour a fuzzer chose.
type scriptAttempt struct {
	items  []Item
	end    error // after the items: io.EOF (no terminal) or a transport error
	hang   bool  // block after the items until closed
	closes atomic.Int32
	closed chan struct{}
	once   sync.Once
	i      int
}

func (a *scriptAttempt) Kind() Kind                  { return KindEvents }
func (a *scriptAttempt) ProviderID() string          { return "n/a" }
func (a *scriptAttempt) Model() string               { return "m" }
func (a *scriptAttempt) StallTimeout() time.Duration { return time.Minute }
func (a *scriptAttempt) Close() {
	a.closes.Add(1)
	a.once.Do(func() { close(a.closed) })
}

func (a *scriptAttempt) Recv() (Item, error) {
	if a.i < len(a.items) {
		a.i++
		return a.items[a.i-1], nil
	}
	if a.hang {
		<-a.closed
		return Item{}, io.ErrClosedPipe
	}
	return Item{}, a.end
}

func upstreamErr(status int) Item {
	ue := &execution.UpstreamError{Status: status, Type: "server_error", Message: "upstream said no"}
	return ev(execution.RunEvent{Type: execution.EventTypeError, Error: ue.Message, Failure: execution.UpstreamFailure(ue)})
}

// script turns one fuzz byte into an attempt's behaviour.
func script(b byte) *scriptAttempt {
	a := &scriptAttempt{end: io.EOF, closed: make(chan struct{})}
	tool := ev(execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{{Index: 0, ID: "call_1", Name: "f", Arguments: "{}"}}})
	switch b % 11 {
	case 0:
		a.items = []Item{delta("a"), delta("b"), complete()}
	case 1:
		a.items = []Item{stallItem(true, "available")}
	case 2:
		a.items = []Item{delta("a"), stallItem(true, "available")}
	case 3:
		a.items = []Item{upstreamErr(500)}
	case 4:
		a.items = []Item{upstreamErr(429)}
	case 5:
		a.items, a.end = []Item{delta("a")}, errors.New("node connection lost")
	case 6:
		a.items = []Item{tool, stallItem(true, "available")}
	case 7:
		a.hang = true
	case 8:
		a.items = []Item{upstreamErr(400)}
	case 9:
		a.items = []Item{stallItem(false, "unknown")}
	case 10:
		a.items = []Item{delta("a")} // ends without a terminal
	}
	return a
}

type scriptDispatcher struct {
	scripts    []byte
	alternates int
	dispatched []*scriptAttempt
}

func (d *scriptDispatcher) Dispatch(ctx context.Context, _ DispatchRequest) (Attempt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(d.scripts) == 0 {
		return nil, ErrNoProvider
	}
	b := d.scripts[0]
	d.scripts = d.scripts[1:]
	if b == 0xff {
		return nil, ErrDispatchFailed
	}
	a := script(b)
	d.dispatched = append(d.dispatched, a)
	return a, nil
}

func (d *scriptDispatcher) Candidates(DispatchRequest) Candidates {
	return Candidates{Alternates: d.alternates}
}

var outcomes = []string{"success", "cancelled", "stall", "upstream_error", "transport", "abnormal_end", "filtered", "shutdown"}

func attemptRecords() float64 {
	n := 0.0
	for _, o := range outcomes {
		n += testutil.ToFloat64(testMetrics.attempts.WithLabelValues(o))
	}
	return n
}

// FuzzAttemptLifecycle is F6 (and the R19 invariant): a fuzzed request —
// surface, streaming, alternates, an exhausted retry budget, a client
// cancel at a fuzzed instant — meets a fuzzed sequence of attempts that
// complete, stall before or after commit, fail with 5xx/429/4xx, lose
// their node, end without a terminal, emit a tool call, or hang. Whatever
// happens: Serve returns; every dispatched attempt is closed (its lease
// released); each attempt leaves exactly one terminal record with an
// outcome from the closed set; the retry budget is back to zero in flight;
// and unless the client left, what it received is either an error in the
// OpenAI shape or a valid stream with exactly one terminal.
func FuzzAttemptLifecycle(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{0})
	f.Add(byte(1), byte(0), []byte{1, 0})
	f.Add(byte(1|4), byte(0), []byte{2, 0})
	f.Add(byte(1|2), byte(0), []byte{3, 4, 0})
	f.Add(byte(1|16), byte(40), []byte{7, 0})
	f.Add(byte(1|32|4), byte(0), []byte{1, 0})
	f.Add(byte(0|4), byte(0), []byte{5, 10, 6, 0xff, 9})
	f.Fuzz(func(t *testing.T, flags, cancelAt byte, scripts []byte) {
		if len(scripts) > 8 {
			scripts = scripts[:8]
		}
		bubble.Test(t, func(t *testing.T) {
			d := &scriptDispatcher{scripts: scripts, alternates: int(flags>>2) & 1}
			budget := NewBudget(BudgetConfig{}, nil)
			if flags&32 != 0 { // the shared budget is used up by others
				for range 3 {
					if _, ok := budget.TryAcquire(); !ok {
						t.Fatal("budget refused its minimum")
					}
				}
			}
			sf := surface.Chat
			if flags&2 != 0 {
				sf = surface.Responses
			}
			req := &Request{Surface: sf, Stream: flags&1 != 0, Model: "m", Snapshot: []byte(`{"model":"m"}`), SideEffects: flags&64 != 0}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if flags&16 != 0 {
				time.AfterFunc(time.Duration(cancelAt)*time.Second, cancel)
			}
			cfg := Config{Dispatcher: d, Budget: budget, Metrics: testMetrics}.WithDefaults()
			before := attemptRecords()
			w := httptest.NewRecorder()
			Serve(ctx, &cfg, req, w)

			for i, a := range d.dispatched {
				if a.closes.Load() == 0 {
					t.Fatalf("attempt %d never closed (lease held)", i)
				}
			}
			if got := attemptRecords() - before; got != float64(len(d.dispatched)) {
				t.Fatalf("%v terminal records for %d attempts", got, len(d.dispatched))
			}
			if flags&32 != 0 && budget.InFlight() != 3 || flags&32 == 0 && budget.InFlight() != 0 {
				t.Fatalf("budget in flight %d after the request", budget.InFlight())
			}
			if ctx.Err() != nil {
				return // the client left: nothing more is owed to it
			}
			checkClientView(t, req, w)
		})
	})
}

func checkClientView(t *testing.T, req *Request, w *httptest.ResponseRecorder) {
	t.Helper()
	body := w.Body.Bytes()
	if w.Code != 200 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("status %d with body %q", w.Code, body)
		}
		return
	}
	if !req.Stream {
		if !json.Valid(body) {
			t.Fatalf("200 with a body that is not JSON: %q", body)
		}
		return
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answered as %q", w.Header().Get("Content-Type"))
	}
	check := streamcheck.Chat
	if req.Surface == surface.Responses {
		check = streamcheck.Responses
	}
	if err := check(body); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
}

// FuzzRecoveryObservationRedaction is F7 on the edge's liveness-recovery
// projection: a sentinel in any value handed to the observer never reaches
// a metric label or the log record.
func FuzzRecoveryObservationRedaction(f *testing.F) {
	f.Add("normalized", "available", "transport_uncommitted", "eligible", "redispatched")
	f.Add("x\n{\"level\":\"error\"}", "\x1b[31m", "", "", "")
	buf := &logbuf.Buffer{}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		f.Fatal(err)
	}
	o := newRecoveryObserver(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), m)
	f.Fuzz(func(t *testing.T, path, health, state, eligibility, result string) {
		const s = "SENTINEL-"
		buf.Reset()
		o.eligibility(s+path, s+health, CommitState(s+state), s+eligibility)
		o.result(s+path, s+health, CommitState(s+state), s+result)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if out := fmt.Sprint(mfs) + buf.String(); strings.Contains(out, "SENTINEL") {
			t.Fatalf("sentinel in the output:\n%s", out)
		}
	})
}
