package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/nodeagent"
)

// TestAnswersThatAreNotOne: an OpenAI-compatible upstream that answers
// 200 with an empty body never reaches the client as a success: beside a
// healthy provider of the model every request is served there; alone,
// the SDK gets a 502 saying what the upstream did. Its whole JSON answer
// to a streaming request (a server that does not stream), which the
// official SDK would read as an empty stream without an error, reaches
// the SDK as the stream of that answer.
func TestAnswersThatAreNotOne(t *testing.T) {
	var bad, badStreams atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		bad.Add(1)
		w.Header().Set("Content-Type", "application/json")
		var req struct{ Stream bool }
		if json.NewDecoder(r.Body).Decode(&req) != nil || !req.Stream { // a JSON request: an empty body
			return
		}
		badStreams.Add(1)
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		b := nodeagent.ProviderConfig{ID: "bad", Adapter: "openai", BaseURL: srv.URL + "/v1", Models: []string{"m", "alone"}, Capacity: 8}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{b, c.WallProvider("good", "openai", nodeagent.PathAuto, "m")}}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}
	// The pool takes the least recently used of two idle providers, so
	// requests of one kind in a row reach both; of two kinds in turn they
	// could each keep to one. Each kind runs until the bad upstream had
	// one of them (and at least three).
	const most = 20
	for i := 0; i < 3 || bad.Load() == badStreams.Load(); i++ {
		if i == most {
			t.Fatalf("the bad upstream had no JSON request of %d: the test proves nothing", most)
		}
		r, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: "m", Messages: msgs})
		if err != nil || len(r.Choices) != 1 || r.Choices[0].Message.Content == "" {
			t.Fatalf("JSON request %d: %+v %v", i, r, err)
		}
	}
	for i := 0; i < 3 || badStreams.Load() == 0; i++ {
		if i == most {
			t.Fatalf("the bad upstream had no stream of %d: the test proves nothing", most)
		}
		s := client.Chat.Completions.NewStreaming(t.Context(), oai.ChatCompletionNewParams{Model: "m", Messages: msgs})
		n := 0
		for s.Next() {
			n++
		}
		if s.Err() != nil || n == 0 {
			t.Fatalf("stream %d: %d chunks, %v", i, n, s.Err())
		}
	}

	var apiErr *oai.Error
	_, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: "alone", Messages: msgs})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "upstream_error" {
		t.Errorf("an empty answer alone: %v", err)
	}
	s := client.Chat.Completions.NewStreaming(t.Context(), oai.ChatCompletionNewParams{Model: "alone", Messages: msgs})
	var acc oai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if s.Err() != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "whole" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("a whole JSON answer to a stream alone: %+v %v", acc.Choices, s.Err())
	}
}
