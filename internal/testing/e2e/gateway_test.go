package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/iopgw/iop/nodeagent"
)

// fourPaths is a cluster with one provider per combination of adapter and
// path, each serving its own model.
func fourPaths(t *testing.T) *Cluster {
	return Start(t, Options{}, func(c *Cluster) []NodeSpec {
		simN := Sim("sim-n", nodeagent.SimConfig{})
		simN.Models = []string{"sim-normalized"}
		simT := Sim("sim-t", nodeagent.SimConfig{})
		simT.Models, simT.Path = []string{"sim-tunnel"}, nodeagent.PathTunnel
		wallT := c.WallProvider("wall-t", "openai", nodeagent.PathTunnel, "ok", "slow", "tools", "midstream-error", "truncate-abort", "status-400", "ctx-length-400")
		wallN := c.WallProvider("wall-n", "openai", nodeagent.PathNormalized, "ok-normalized")
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{simN, simT}}, {ID: "node-b", Providers: []nodeagent.ProviderConfig{wallT, wallN}}}
	})
}

func newOpenAIGo(c *Cluster) oai.Client {
	return oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func newGoOpenAI(c *Cluster) *goopenai.Client {
	cfg := goopenai.DefaultConfig("sk-test")
	cfg.BaseURL = c.URL + "/v1"
	return goopenai.NewClientWithConfig(cfg)
}

func TestChatWithOfficialGoClients(t *testing.T) {
	c := fourPaths(t)
	ctx := context.Background()
	for _, model := range []string{"sim-normalized", "sim-tunnel", "ok"} {
		t.Run(model, func(t *testing.T) {
			client := newOpenAIGo(c)
			resp, err := client.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: model,
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello gateway")}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content == "" || resp.Usage.TotalTokens == 0 || resp.Choices[0].FinishReason != "stop" {
				t.Fatalf("response %+v", resp)
			}
			stream := client.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Model: model,
				Messages:      []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hello gateway")},
				StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}})
			acc := oai.ChatCompletionAccumulator{}
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content || acc.Usage.TotalTokens == 0 {
				t.Fatalf("stream %q usage %d, json %q", acc.Choices[0].Message.Content, acc.Usage.TotalTokens, resp.Choices[0].Message.Content)
			}

			gc := newGoOpenAI(c)
			gs, err := gc.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: model, Stream: true,
				Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hello gateway"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer gs.Close()
			var text strings.Builder
			for {
				r, err := gs.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Choices) > 0 {
					text.WriteString(r.Choices[0].Delta.Content)
				}
			}
			if text.String() != resp.Choices[0].Message.Content {
				t.Fatalf("go-openai text %q", text.String())
			}
		})
	}
	c.WaitIdle(t)
}

func TestNormalizedOpenAIProviderToolCalls(t *testing.T) {
	c := fourPaths(t)
	client := newOpenAIGo(c)
	stream := client.Chat.Completions.NewStreaming(context.Background(), oai.ChatCompletionNewParams{Model: "sim-normalized",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("what is the weather in Paris")},
		Tools: []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "get_weather",
			Parameters: oai.FunctionParameters{"type": "object"}})}})
	acc := oai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	calls := acc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || !json.Valid([]byte(calls[0].Function.Arguments)) || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("tool calls %+v finish %q", calls, acc.Choices[0].FinishReason)
	}
}

func TestResponsesWithOpenAIGo(t *testing.T) {
	c := fourPaths(t)
	client := newOpenAIGo(c)
	ctx := context.Background()
	for _, model := range []string{"sim-normalized", "sim-tunnel", "ok"} {
		t.Run(model, func(t *testing.T) {
			r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
			if err != nil {
				t.Fatal(err)
			}
			if r.OutputText() == "" || r.Status != "completed" {
				t.Fatalf("response %+v", r)
			}
			stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
			var text string
			completed := false
			seq := int64(0)
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != seq {
					t.Fatalf("sequence %d, want %d", ev.SequenceNumber, seq)
				}
				seq++
				switch ev.Type {
				case "response.output_text.delta":
					text += ev.Delta
				case "response.completed":
					completed = true
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if !completed || text != r.OutputText() {
				t.Fatalf("stream text %q completed %v, json %q", text, completed, r.OutputText())
			}
		})
	}
}

func TestModelsEndpoints(t *testing.T) {
	c := fourPaths(t)
	client := newOpenAIGo(c)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range page.Data {
		ids[m.ID] = true
	}
	for _, want := range []string{"sim-normalized", "sim-tunnel", "ok", "ok-normalized"} {
		if !ids[want] {
			t.Fatalf("models %v lack %s", ids, want)
		}
	}
	m, err := client.Models.Get(context.Background(), "sim-tunnel")
	if err != nil || m.ID != "sim-tunnel" {
		t.Fatalf("get model %+v %v", m, err)
	}
	_, err = client.Models.Get(context.Background(), "nope")
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown model err %v", err)
	}
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

func TestOllamaSurface(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		ol := c.WallProvider("ollama-1", "ollama", "", "llama3.2")
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{Sim("sim-a", nodeagent.SimConfig{}), ol}}}
	})
	// Native Ollama provider: bytes from the wall.
	resp := post(t, c.URL+"/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp)
	lines := strings.Split(strings.TrimSpace(body), "\n")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || len(lines) != len(c.Wall.Tokens)+1 || !strings.Contains(lines[len(lines)-1], `"done":true`) {
		t.Fatalf("native chat %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// A sim provider rendered as Ollama NDJSON.
	for _, path := range []string{"/api/chat", "/api/generate"} {
		reqBody := `{"model":"iop-sim","messages":[{"role":"user","content":"hi"}]}`
		if path == "/api/generate" {
			reqBody = `{"model":"iop-sim","prompt":"hi"}`
		}
		resp = post(t, c.URL+path, reqBody)
		body = readAll(t, resp)
		sc := bufio.NewScanner(strings.NewReader(body))
		n, done := 0, false
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%s line %q: %v", path, sc.Text(), err)
			}
			n++
			done = line["done"] == true
		}
		if resp.StatusCode != 200 || n < 2 || !done {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	// Non-streaming.
	resp = post(t, c.URL+"/api/chat", `{"model":"iop-sim","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	var one struct {
		Done    bool                     `json:"done"`
		Message struct{ Content string } `json:"message"`
	}
	if err := json.Unmarshal([]byte(readAll(t, resp)), &one); err != nil || !one.Done || one.Message.Content == "" {
		t.Fatalf("non-streaming chat %+v %v", one, err)
	}
	for path, want := range map[string]string{"/": "Ollama is running", "/api/version": `"version"`, "/api/tags": `"name":"llama3.2"`, "/api/ps": `"name":"iop-sim"`} {
		r, err := http.Get(c.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, r); r.StatusCode != 200 || !strings.Contains(b, want) {
			t.Fatalf("%s: %d %q", path, r.StatusCode, b)
		}
	}
	resp = post(t, c.URL+"/api/show", `{"model":"iop-sim"}`)
	if b := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(b, "capabilities") {
		t.Fatalf("show %d %s", resp.StatusCode, b)
	}
	for _, tc := range []struct{ path, body string }{
		{"/api/show", `{"model":"missing"}`},
		{"/api/chat", `{"model":"missing","messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp = post(t, c.URL+tc.path, tc.body)
		if b := readAll(t, resp); resp.StatusCode != 404 || b != `{"error":"model 'missing' not found"}` {
			t.Fatalf("%s missing: %d %s", tc.path, resp.StatusCode, b)
		}
	}
	resp = post(t, c.URL+"/api/chat", `{"model":`)
	if b := readAll(t, resp); resp.StatusCode != 400 || !strings.HasPrefix(b, `{"error":"`) {
		t.Fatalf("bad json: %d %s", resp.StatusCode, b)
	}
	c.WaitIdle(t)
}

// TestClientDisconnectCancelsUpstream: closing the client connection
// cancels the node's run and the upstream request within 500 ms, on both
// paths, streaming and not.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		c.Wall.Models = []string{"slow"} // before the node connects (and the edge probes it)
		return []NodeSpec{{ID: "node-a", Providers: []nodeagent.ProviderConfig{
			c.WallProvider("wall-t", "openai", nodeagent.PathTunnel, "slow", "stall-after-2"),
			func() nodeagent.ProviderConfig {
				p := c.WallProvider("wall-n", "openai", nodeagent.PathNormalized, "slow-n")
				return p
			}(),
		}}}
	})
	for _, tc := range []struct{ model, body string }{
		{"slow", `{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"stall-after-2", `{"model":"stall-after-2","messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.model, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/v1/chat/completions", strings.NewReader(tc.body))
			go func() {
				time.Sleep(400 * time.Millisecond)
				cancel()
			}()
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			cancelled := time.Now()
			attempts := c.Wall.AttemptsFor(tc.model)
			if len(attempts) != 1 {
				t.Fatalf("%d upstream attempts", len(attempts))
			}
			select {
			case <-attempts[0].Done():
			case <-time.After(3 * time.Second):
				t.Fatal("upstream never saw the cancel")
			}
			if !attempts[0].Cancelled() {
				t.Fatal("upstream was not cancelled")
			}
			if d := attempts[0].EndedAt().Sub(cancelled); d > 500*time.Millisecond {
				t.Fatalf("upstream saw the cancel after %v", d)
			}
			t.Logf("cancel reached the upstream %v after the client closed", max(0, attempts[0].EndedAt().Sub(cancelled)))
			c.WaitIdle(t)
		})
	}
}
