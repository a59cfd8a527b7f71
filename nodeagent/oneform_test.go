package nodeagent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// TestOneFormCarriesEveryMessage: the link carries a run once, as its
// Chat body; the messages and parameters the node parses from it are the
// ones the edge decoded from the client's surface — Chat, Responses
// (translated) and Ollama (translated) alike, images, tools, tool results
// and stop sequences included.
func TestOneFormCarriesEveryMessage(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"look"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,aGk="}}]},{"role":"assistant","tool_calls":[{"id":"c1","type":"function",` +
		`"function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}],` +
		`"temperature":0.3,"top_p":0.9,"max_tokens":12,"seed":7,"stop":["x","y"],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"}`
	responses := `{"model":"m","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],` +
		`"temperature":0.2,"max_output_tokens":20}`
	ollamaChat := `{"model":"m","messages":[{"role":"user","content":"hi","images":["aGk="]}],"options":{"temperature":0.4,"num_predict":9,` +
		`"stop":["a","b","c","d","e","f"],"seed":1}}`

	cases := map[string]func(t *testing.T) (*execution.RunRequest, []byte){
		"chat": func(t *testing.T) (*execution.RunRequest, []byte) {
			r, e := openai.DecodeChatRequest([]byte(chat), openai.Limits{})
			if e != nil {
				t.Fatal(e)
			}
			return r.RunRequest(), []byte(chat)
		},
		"responses": func(t *testing.T) (*execution.RunRequest, []byte) {
			r, e := openai.DecodeResponsesRequest([]byte(responses), openai.Limits{})
			if e != nil {
				t.Fatal(e)
			}
			body, terr := openai.ResponsesToChat([]byte(responses))
			if terr != nil {
				t.Fatal(terr)
			}
			return r.RunRequest(), body
		},
		"ollama": func(t *testing.T) (*execution.RunRequest, []byte) {
			r, oe := ollama.Decode([]byte(ollamaChat), false, 64)
			if oe != nil {
				t.Fatal(oe)
			}
			body, terr := ollama.ToChat([]byte(ollamaChat), false)
			if terr != nil {
				t.Fatal(terr)
			}
			return &execution.RunRequest{Model: r.Model, Messages: r.Messages, Params: r.Params}, body
		},
	}
	for name, decode := range cases {
		t.Run(name, func(t *testing.T) {
			edge, body := decode(t)
			sent := *edge
			sent.RunID, sent.ChatBody = "run_1", body
			m := wire.RunRequestToProto(&sent)
			if len(m.GetMessages()) != 0 {
				t.Fatal("the run crossed in two forms")
			}
			got, err := runRequestFromProto(m)
			if err != nil {
				t.Fatal(err)
			}
			// Ollama's bare base64 images cross as data URLs, which every
			// adapter maps back (the Ollama adapter sends the bare base64).
			bare := cmp.Transformer("bare", func(img string) string {
				if _, b64, ok := strings.Cut(img, ";base64,"); ok {
					return b64
				}
				return img
			})
			if d := cmp.Diff(edge.Messages, got.Messages, cmpopts.EquateEmpty(), bare); d != "" {
				t.Errorf("messages differ (-edge +node):\n%s", d)
			}
			if d := cmp.Diff(edge.Params, got.Params, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("parameters differ (-edge +node):\n%s", d)
			}
		})
	}
}

// TestOneFormRefusesABrokenBody: a Chat body the node cannot parse is a
// boundary rejection before any provider runs.
func TestOneFormRefusesABrokenBody(t *testing.T) {
	_, err := runRequestFromProto(&wire.RunRequest{RunId: "r", ChatBody: []byte(`{"messages":"no"}`)})
	if f, ok := err.(*execution.ExecutionFailure); !ok || f.Code != execution.FailureCodeInvalidRequest {
		t.Fatalf("got %v", err)
	}
}
