package openai

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/testing/streamcheck"
)

// FuzzReadStream is F3 and F4 for OpenAI-compatible upstreams (vLLM,
// llama.cpp, OpenAI): random bytes split at random points go through the
// go-sse reader and the chunk translator. The translator never panics, ends
// every execution exactly once (a terminal event or an error, never a
// silent end), and what the client would receive is a valid chat SSE
// sequence with exactly one terminal.
func FuzzReadStream(f *testing.F) {
	ok := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\ndata: [DONE]\n\n"
	f.Add([]byte(ok), []byte{0})
	f.Add([]byte(strings.ReplaceAll(ok, "\n", "\r\n")), []byte{3, 7})
	f.Add([]byte(strings.ReplaceAll(ok, "\n\n", "\n")), []byte{})                                    // missing blank lines
	f.Add([]byte(strings.TrimSuffix(ok, "data: [DONE]\n\n")), []byte{1})                             // no [DONE]
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"), []byte{}) // cut
	f.Add([]byte("data: {not json\n\n"), []byte{})
	f.Add([]byte(": keepalive\n\n: keepalive\n\n"), []byte{})
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"), []byte{})
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"), []byte{5})
	f.Add([]byte("data: \""+strings.Repeat("x", 2<<20)+"\"\n\n"), []byte{255}) // 2 MiB line
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var evs []execution.RunEvent
		em := execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) })
		em.Emit(execution.RunEvent{Type: execution.EventTypeStart, Model: "m"})
		resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(&streamcheck.Splitter{Data: data, Cuts: cuts})}
		err := (&Provider{}).readStream(context.Background(), resp.Body, em)
		if cerr := streamcheck.Execution(evs, err); cerr != nil {
			t.Fatalf("%v\ninput %.200q", cerr, data)
		}
	})
}
