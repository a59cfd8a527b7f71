package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iopgw/iop/execution"
)

func execute(t *testing.T, p *Provider, req *execution.RunRequest, timeout time.Duration) ([]execution.RunEvent, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var evs []execution.RunEvent
	em := execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) })
	err := p.Execute(ctx, req, em)
	return evs, err
}

func req(content string) *execution.RunRequest {
	return &execution.RunRequest{Model: "iop-sim", Messages: []execution.Message{{Role: "user", Content: content}}}
}

func TestDeterministicAnswer(t *testing.T) {
	p := New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond})
	a, _ := execute(t, p, req("tell me about gateways"), time.Second)
	b, _ := execute(t, p, req("tell me about gateways"), time.Second)
	if len(a) != len(b) || len(a) < 3 {
		t.Fatalf("%d vs %d events", len(a), len(b))
	}
	var ta, tb string
	for i := range a {
		ta += a[i].Delta
		tb += b[i].Delta
	}
	if ta != tb || ta == "" {
		t.Fatalf("%q vs %q", ta, tb)
	}
	last := a[len(a)-1]
	if last.Type != execution.EventTypeComplete || last.Usage.CompletionTokens != int64(len(a)-2) || last.Usage.PromptTokens != 4 {
		t.Fatalf("terminal %+v", last)
	}
	limit := int64(3)
	r := req("hi")
	r.Params.MaxTokens = &limit
	evs, _ := execute(t, p, r, time.Second)
	if evs[len(evs)-1].FinishReason != "length" || len(evs) != 5 {
		t.Fatalf("max_tokens: %+v", evs)
	}
}

func TestToolCallAnswer(t *testing.T) {
	p := New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond})
	r := req("weather in Paris")
	r.Params.Tools = []byte(`[{"type":"function","function":{"name":"get_weather"}}]`)
	evs, _ := execute(t, p, r, time.Second)
	var args string
	for _, ev := range evs {
		for _, tc := range ev.ToolCalls {
			args += tc.Arguments
		}
	}
	if evs[1].ToolCalls[0].Name != "get_weather" || args != `{"input":"weather in Paris"}` || evs[len(evs)-1].FinishReason != "tool_calls" {
		t.Fatalf("%+v %q", evs, args)
	}
}

func TestFaults(t *testing.T) {
	short := 100 * time.Millisecond
	p := New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond, StallAfter: 2, UnhealthyAfterStall: time.Hour, InstanceKey: "sim/x"})
	evs, err := execute(t, p, req("hi"), short)
	if !errors.Is(err, context.DeadlineExceeded) || len(evs) != 3 {
		t.Fatalf("stall-after: %d events, %v", len(evs), err)
	}
	res, _ := p.ProbeTarget(context.Background(), execution.ProbeRequest{Target: "iop-sim"})
	if res.Status != execution.HealthUnavailable || res.InstanceKey != "sim/x" {
		t.Fatalf("probe after stall %+v", res)
	}
	p = New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond, CutAfter: 2})
	_, err = execute(t, p, req("hi"), time.Second)
	var f *execution.ExecutionFailure
	if !errors.As(err, &f) || f.Code != execution.FailureCodeUpstreamError {
		t.Fatalf("cut: %v", err)
	}
	p = New(Config{Models: []string{"iop-sim"}, ErrorStatus: 429, ErrorCount: 1})
	evs, _ = execute(t, p, req("hi"), time.Second)
	if u := evs[0].Failure.Upstream; u.Status != 429 || u.RetryAfterMS != 1000 {
		t.Fatalf("429: %+v", evs[0])
	}
	evs, _ = execute(t, p, req("hi"), time.Second)
	if evs[len(evs)-1].Type != execution.EventTypeComplete {
		t.Fatalf("second attempt after error_count 1: %+v", evs[len(evs)-1])
	}
	res, _ = p.ProbeTarget(context.Background(), execution.ProbeRequest{Target: "other-model"})
	if res.Status != execution.HealthUnavailable {
		t.Fatal("a target the sim does not serve is available")
	}
}

// TestStopSequences: the sim's answer ends where the first stop sequence
// would begin, without it, finished by stop — a token cut inside when the
// sequence starts there — and max_tokens still cuts what is left.
func TestStopSequences(t *testing.T) {
	p := New(Config{Models: []string{"iop-sim"}, TokenLatency: time.Microsecond})
	text := func(stop []string, limit int64) (string, string) {
		r := req("hi")
		r.Params.Stop = stop
		if limit > 0 {
			r.Params.MaxTokens = &limit
		}
		evs, _ := execute(t, p, r, time.Second)
		var s string
		for _, ev := range evs {
			s += ev.Delta
		}
		return s, evs[len(evs)-1].FinishReason
	}
	full, _ := text(nil, 0)
	for _, tc := range []struct {
		stop   []string
		limit  int64
		text   string
		finish string
	}{
		{[]string{"comes"}, 0, "You said: hi. This answer ", "stop"},
		{[]string{"nowhere", "swer", "You"}, 0, "", "stop"},
		{[]string{"nswer c"}, 0, "You said: hi. This a", "stop"},
		{[]string{"not in it"}, 0, full, "stop"},
		{[]string{"comes"}, 2, "You said:", "length"},
	} {
		if got, finish := text(tc.stop, tc.limit); got != tc.text || finish != tc.finish {
			t.Errorf("stop %q, max %d: %q (%s), want %q (%s)", tc.stop, tc.limit, got, finish, tc.text, tc.finish)
		}
	}
}
