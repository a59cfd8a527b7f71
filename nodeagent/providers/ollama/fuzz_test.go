package ollama

import (
	"context"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/streamcheck"
)

// FuzzReadNDJSON is F4 for Ollama's /api/chat NDJSON: random lines split at
// random points never panic the translator, every execution ends exactly
// once, and the client-side rendering is a valid chat SSE sequence with
// exactly one terminal.
func FuzzReadNDJSON(f *testing.F) {
	ok := `{"message":{"role":"assistant","content":"hi"},"done":false}` + "\n" +
		`{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":1}` + "\n"
	f.Add([]byte(ok), []byte{0})
	f.Add([]byte(strings.ReplaceAll(ok, "\n", "\r\n")), []byte{2, 9})
	f.Add([]byte(strings.SplitAfter(ok, "\n")[0]), []byte{}) // cut before done
	f.Add([]byte(`{"error":"model not found"}`+"\n"), []byte{})
	f.Add([]byte("{not json\n"), []byte{})
	f.Add([]byte(`{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"done":true}`), []byte{4})
	f.Add([]byte(`{"message":{"thinking":"hmm"},"done":false}`+"\n\n\n"), []byte{})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var evs []execution.RunEvent
		em := execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) })
		em.Emit(execution.RunEvent{Type: execution.EventTypeStart, Model: "m"})
		err := readNDJSON(context.Background(), &streamcheck.Splitter{Data: data, Cuts: cuts}, em)
		if cerr := streamcheck.Execution(evs, err); cerr != nil {
			t.Fatalf("%v\ninput %.200q", cerr, data)
		}
	})
}
