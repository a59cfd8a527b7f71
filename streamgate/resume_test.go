package streamgate

import (
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

// Issue 29: the resume ladder (prefill, then a verified splice), targets
// as (provider, model) pairs, and connect-level failures condemning the
// provider. Each stream's text is compared with a clean run's, byte for
// byte.

// clientText is the text of a Chat stream's content deltas, in order.
func clientText(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		i := strings.Index(line, `"content":"`)
		if i < 0 {
			continue
		}
		rest := line[i+len(`"content":"`):]
		b.WriteString(rest[:strings.IndexByte(rest, '"')])
	}
	return b.String()
}

func deltas(parts ...string) []Item {
	var out []Item
	for _, p := range parts {
		out = append(out, delta(p))
	}
	return out
}

func TestResumeLadder(t *testing.T) {
	const clean = "Hello world, from iop."
	resume := DefaultRetryPolicy()
	resume.Resume = true
	noSplice := resume
	noSplice.NoSplice = true
	cut := func() *fakeAttempt { return &fakeAttempt{items: deltas("Hello", " wor")} } // cut after 9 bytes: no terminal
	refuse := func() *fakeAttempt {
		return &fakeAttempt{items: []Item{upstreamFail(400, "", 0)}}
	}
	regen := func(parts ...string) *fakeAttempt {
		return &fakeAttempt{items: append(append([]Item{ev(execution.RunEvent{Type: execution.EventTypeStart, ResponseID: "other"})}, deltas(parts...)...), complete())}
	}
	for _, tt := range []struct {
		name    string
		models  map[string][]string
		prefill map[string]bool
		pol     RetryPolicy
		script  func(p string, n int, r DispatchRequest) *fakeAttempt
		want    string // dispatches
		text    string // what the client reads
		code    string // the in-band terminal's code, "" for a clean end
	}{
		{name: "shared upstream: the fallback model on the same server continues", models: map[string][]string{"p": {"s"}, "f": {"s"}},
			prefill: map[string]bool{"s": true}, pol: resume, want: "p@s f@s", text: clean,
			script: func(_ string, n int, r DispatchRequest) *fakeAttempt {
				if n == 1 {
					return cut()
				}
				return regen("ld, from iop.")
			}},
		{name: "refused prefill, splice on the refusing target", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			prefill: map[string]bool{"f1": true}, pol: resume, want: "p@p1 f@f1 f@f1", text: clean,
			script: func(p string, _ int, r DispatchRequest) *fakeAttempt {
				switch {
				case p == "p1":
					return cut()
				case r.Work.Run.Continuation:
					return refuse()
				}
				return regen("Hel", "lo w", "orld, from iop.") // the prefix in other chunks
			}},
		{name: "no prefill anywhere, splice in one chunk", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			pol: resume, want: "p@p1 f@f1", text: clean,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return regen(clean)
			}},
		{name: "splice byte by byte", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			pol: resume, want: "p@p1 f@f1", text: clean,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return regen(strings.Split(clean, "")...)
			}},
		{name: "splice diverges: typed end, nothing of the difference", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			pol: resume, want: "p@p1 f@f1", text: "Hello wor", code: codeResumeDiverged,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return regen("Hello", " there, and more")
			}},
		{name: "regeneration shorter than what the client has", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			pol: resume, want: "p@p1 f@f1", text: "Hello wor", code: codeResumeDiverged,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return regen("Hello")
			}},
		{name: "splice off: the refusal is never the last word, the cut is", models: map[string][]string{"p": {"p1"}, "f": {"f1"}},
			prefill: map[string]bool{"f1": true}, pol: noSplice, want: "p@p1 f@f1", text: "Hello wor", code: codeUpstreamError,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return refuse()
			}},
		{name: "two primaries: the other provider of the model first", models: map[string][]string{"p": {"p1", "p2"}, "f": {"f1"}},
			prefill: map[string]bool{"p2": true, "f1": true}, pol: resume, want: "p@p1 p@p2", text: clean,
			script: func(p string, _ int, _ DispatchRequest) *fakeAttempt {
				if p == "p1" {
					return cut()
				}
				return regen("ld, from iop.")
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{models: tt.models, prefill: tt.prefill, script: tt.script}
			log, body, _ := policyRun(t, w, tt.pol)
			got := targetsOf(log)
			if strings.Join(got, " ") != tt.want {
				t.Errorf("dispatches %v, want %s", got, tt.want)
			}
			if txt := clientText(body); txt != tt.text {
				t.Errorf("client text %q, want %q\n%s", txt, tt.text, body)
			}
			switch {
			case tt.code == "" && (!strings.Contains(body, "[DONE]") || strings.Contains(body, `"error"`)):
				t.Errorf("not a clean end:\n%s", body)
			case tt.code != "" && (strings.Contains(body, "[DONE]") || !strings.Contains(body, `"code":"`+tt.code+`"`)):
				t.Errorf("want the typed terminal %s:\n%s", tt.code, body)
			}
			if strings.Count(body, `"role":"assistant"`) > 1 || strings.Contains(body, `"id":"other"`) {
				t.Errorf("the continuation restarted the stream:\n%s", body)
			}
		})
	}
}

// TestConnectFailureCondemnsTheProvider: a refused connection excludes
// its provider for every other model of the request (the server is down;
// its own model keeps its retries), where a 5xx or a cut excludes only
// that (provider, model) target.
func TestConnectFailureCondemnsTheProvider(t *testing.T) {
	refused := ev(execution.RunEvent{Type: execution.EventTypeError, Error: "refused",
		Failure: execution.UpstreamFailure(&execution.UpstreamError{Code: "upstream_refused", Message: "connection refused"})})
	for _, tt := range []struct {
		name string
		fail Item
		want string
	}{
		{"refused: retried on its model, not the same server for the fallback", refused, "p@s p@s p@s f@g"},
		{"503: the same server may serve the fallback", upstreamFail(503, "", 0), "p@s p@s p@s f@s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{models: map[string][]string{"p": {"s"}, "f": {"s", "g"}}}
			w.script = func(p string, _ int, r DispatchRequest) *fakeAttempt {
				if r.Model == "p" {
					return &fakeAttempt{items: []Item{tt.fail}}
				}
				return answer("fine")
			}
			log, body, _ := policyRun(t, w, DefaultRetryPolicy())
			got := targetsOf(log)
			if strings.Join(got, " ") != tt.want || !strings.Contains(body, "fine") {
				t.Fatalf("dispatches %v, want %s; client %q", got, tt.want, body)
			}
		})
	}
}
