package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/iopgw/iop/nodeagent"
)

// vllmStops is an OpenAI-compatible upstream that names the stop that
// ended its answer as vLLM does: the choice's stop_reason, the matched
// stop string (here the first of the request's "stop", else "</s>", a
// string the request did not ask for), or for the model "token-stop" a
// stop token's id. It answers a stream or a whole completion as asked.
func vllmStops(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r) // the node's discovery asks for the model list
			return
		}
		var req struct {
			Model  string   `json:"model"`
			Stream bool     `json:"stream"`
			Stop   []string `json:"stop"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("upstream: %v", err)
		}
		named := `"</s>"`
		switch {
		case req.Model == "token-stop":
			named = "128009"
		case len(req.Stop) > 0:
			b, _ := json.Marshal(req.Stop[0])
			named = string(b)
		}
		head := `"id":"chatcmpl-v","created":1700000000,"model":"` + req.Model + `"`
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{%s,"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"one two","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":%s}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, head, named)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{
			`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`,
			`"choices":[{"index":0,"delta":{"content":"one two"},"logprobs":null,"finish_reason":null,"stop_reason":null}]`,
			`"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":` + named + `}]`,
			`"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`,
		} {
			fmt.Fprintf(w, "data: {%s,\"object\":\"chat.completion.chunk\",%s}\n\n", head, c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

// TestStopSequenceFromAChatUpstream: an Anthropic client's answer
// translated from a Chat upstream reports the stop sequence that ended it
// (stop_reason stop_sequence, and the sequence) when the upstream names
// it as vLLM does and the request asked for it — streamed or whole. A
// sequence the request did not ask for, or a stop token's id, reads
// end_turn, as an upstream that names nothing (OpenAI) does.
func TestStopSequenceFromAChatUpstream(t *testing.T) {
	up := vllmStops(t)
	defer up.Close()
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{{ID: "v", Adapter: "openai", BaseURL: up.URL + "/v1",
			Models: []string{"vllm", "token-stop"}, Capacity: 4}}}}
	})
	client := anthropic.NewClient(antoption.WithBaseURL(c.URL), antoption.WithAPIKey("sk-ant-test"), antoption.WithMaxRetries(0))
	ctx := t.Context()
	params := func(model string, stops ...string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, StopSequences: stops,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count"))}}
	}
	for _, tc := range []struct {
		name, model string
		stops       []string
		reason      anthropic.StopReason
		seq         string
	}{
		{"asked", "vllm", []string{"###", "END"}, anthropic.StopReasonStopSequence, "###"},
		{"not asked", "vllm", nil, anthropic.StopReasonEndTurn, ""},
		{"a token", "token-stop", []string{"###"}, anthropic.StopReasonEndTurn, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := client.Messages.New(ctx, params(tc.model, tc.stops...))
			if err != nil || msg.StopReason != tc.reason || msg.StopSequence != tc.seq || len(msg.Content) != 1 || msg.Content[0].Text != "one two" {
				t.Fatalf("message %+v: %v", msg, err)
			}
			stream := client.Messages.NewStreaming(ctx, params(tc.model, tc.stops...))
			var acc anthropic.Message
			for stream.Next() {
				if err := acc.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil || acc.StopReason != tc.reason || acc.StopSequence != tc.seq || len(acc.Content) != 1 || acc.Content[0].Text != "one two" {
				t.Fatalf("stream %+v: %v", acc, err)
			}
			if !slices.Contains([]string{"vllm", "token-stop"}, acc.Model) {
				t.Errorf("the answer names %q", acc.Model)
			}
		})
	}
}
