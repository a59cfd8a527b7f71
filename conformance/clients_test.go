package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	goopenai "github.com/sashabaranov/go-openai"
)

// outcome is what a client saw.
type outcome struct {
	Status    int        `json:"status"`
	Error     *errorInfo `json:"error"`
	RequestID *string    `json:"requestID"`
	Chunks    int        `json:"chunks"`
	Text      string     `json:"text"`
	Usage     int        `json:"usage"`
	Terminal  string     `json:"terminal"`
	// UpstreamCancel: the upstream saw the client's cancel.
	UpstreamCancel bool `json:"-"`
}

type errorInfo struct {
	Class   string `json:"class"`
	Type    any    `json:"type"`
	Code    any    `json:"code"`
	Param   any    `json:"param"`
	Message string `json:"message,omitempty"`
}

// client runs one scenario against a base URL.
type client struct {
	name string
	run  func(ctx context.Context, base, scenario string) (outcome, error)
}

var jsDir = filepath.Join("testdata", "js")

// needJS fails the test when the JavaScript package pkg (of jsDir's
// package.json) is not installed.
func needJS(t *testing.T, pkg string) {
	t.Helper()
	if !fileExists(filepath.Join(jsDir, "node_modules", pkg, "package.json")) {
		t.Fatal("JavaScript clients are not installed: run `npm ci --prefix conformance/testdata/js` (make test does)")
	}
}

func jsClient(name, nodeBin, pkg string) client {
	return client{name: name, run: func(ctx context.Context, base, scenario string) (outcome, error) {
		cmd := exec.CommandContext(ctx, nodeBin, "client.mjs", pkg, base, scenario)
		cmd.Dir = jsDir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return outcome{}, fmt.Errorf("%s %s: %v: %s", nodeBin, scenario, err, stderr.String())
		}
		var o outcome
		if err := json.Unmarshal(out, &o); err != nil {
			return outcome{}, fmt.Errorf("decoding %q: %v", out, err)
		}
		return o, nil
	}}
}

// node22 is the Node 22 binary installed by npm (the node@22 package).
func node22() string { return filepath.Join("node_modules", "node", "bin", "node") }

func split(scenario string) (kind, model string) {
	kind, model, _ = strings.Cut(scenario, ":")
	return kind, model
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func openaiGo() client {
	return client{name: "openai-go", run: func(ctx context.Context, base, scenario string) (outcome, error) {
		c := oai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
		kind, model := split(scenario)
		o := outcome{Status: 200, Terminal: "ok"}
		var resp *http.Response
		fail := func(err error) (outcome, error) {
			var e *oai.Error
			if errors.As(err, &e) {
				o.Status, o.Terminal = e.StatusCode, "error"
				o.Error = &errorInfo{Class: "APIError", Type: nilIfEmpty(e.Type), Code: nilIfEmpty(e.Code), Param: nilIfEmpty(e.Param)}
				if e.Response != nil {
					o.RequestID = strp(e.Response.Header.Get("X-Request-Id"))
				}
				return o, nil
			}
			o.Terminal, o.Error = "error", &errorInfo{Class: classOf(err)}
			return o, nil
		}
		switch kind {
		case "chat-json":
			r, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}, option.WithResponseInto(&resp))
			if err != nil {
				return fail(err)
			}
			o.RequestID, o.Text, o.Usage, o.Chunks = strp(resp.Header.Get("X-Request-Id")), r.Choices[0].Message.Content, int(r.Usage.TotalTokens), 1
		case "chat-stream", "chat-usage", "chat-cancel":
			p := oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}}
			if kind == "chat-usage" {
				p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s := c.Chat.Completions.NewStreaming(sctx, p, option.WithResponseInto(&resp))
			for s.Next() {
				ch := s.Current()
				o.Chunks++
				for _, choice := range ch.Choices {
					o.Text += choice.Delta.Content
					for _, tc := range choice.Delta.ToolCalls {
						o.Text += tc.Function.Arguments
					}
				}
				if ch.Usage.TotalTokens > 0 {
					o.Usage = int(ch.Usage.TotalTokens)
				}
				if kind == "chat-cancel" && o.Chunks == 2 {
					cancel()
					o.Terminal = "cancelled"
					break
				}
			}
			if resp != nil {
				o.RequestID = strp(resp.Header.Get("X-Request-Id"))
			}
			if err := s.Err(); err != nil && o.Terminal != "cancelled" {
				res, _ := fail(err)
				res.Chunks, res.Text, res.RequestID = o.Chunks, o.Text, o.RequestID
				return res, nil
			}
		case "responses-stream":
			s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}}, option.WithResponseInto(&resp))
			for s.Next() {
				ev := s.Current()
				o.Chunks++
				switch ev.Type {
				case "response.output_text.delta":
					o.Text += ev.Delta
				case "response.completed":
					o.Usage = int(ev.Response.Usage.TotalTokens)
				case "response.failed", "error":
					o.Terminal = ev.Type
				}
			}
			if resp != nil {
				o.RequestID = strp(resp.Header.Get("X-Request-Id"))
			}
			if err := s.Err(); err != nil {
				res, _ := fail(err)
				res.Chunks, res.Text, res.RequestID = o.Chunks, o.Text, o.RequestID
				return res, nil
			}
		default:
			return o, fmt.Errorf("openai-go: no scenario %s", scenario)
		}
		return o, nil
	}}
}

func goOpenAI() client {
	return client{name: "go-openai", run: func(ctx context.Context, base, scenario string) (outcome, error) {
		cfg := goopenai.DefaultConfig("sk-test")
		cfg.BaseURL = base + "/v1"
		c := goopenai.NewClientWithConfig(cfg)
		kind, model := split(scenario)
		o := outcome{Status: 200, Terminal: "ok"}
		fail := func(err error) outcome {
			var e *goopenai.APIError
			var re *goopenai.RequestError
			switch {
			case errors.As(err, &e):
				o.Status, o.Terminal = e.HTTPStatusCode, "error"
				o.Error = &errorInfo{Class: "APIError", Type: nilIfEmpty(e.Type), Code: e.Code, Param: e.Param}
			case errors.As(err, &re):
				o.Status, o.Terminal, o.Error = re.HTTPStatusCode, "error", &errorInfo{Class: "RequestError"}
			default:
				o.Terminal, o.Error = "error", &errorInfo{Class: classOf(err)}
			}
			return o
		}
		req := goopenai.ChatCompletionRequest{Model: model, Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}
		switch kind {
		case "chat-json":
			r, err := c.CreateChatCompletion(ctx, req)
			if err != nil {
				return fail(err), nil
			}
			o.RequestID, o.Text, o.Usage, o.Chunks = strp(r.Header().Get("X-Request-Id")), r.Choices[0].Message.Content, r.Usage.TotalTokens, 1
		case "chat-stream", "chat-usage", "chat-cancel":
			req.Stream = true
			if kind == "chat-usage" {
				req.StreamOptions = &goopenai.StreamOptions{IncludeUsage: true}
			}
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s, err := c.CreateChatCompletionStream(sctx, req)
			if err != nil {
				return fail(err), nil
			}
			defer s.Close()
			o.RequestID = strp(s.Header().Get("X-Request-Id"))
			for {
				ch, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					res := fail(err)
					res.Chunks, res.Text, res.RequestID, res.Status = o.Chunks, o.Text, o.RequestID, 200
					return res, nil
				}
				o.Chunks++
				for _, choice := range ch.Choices {
					o.Text += choice.Delta.Content
					for _, tc := range choice.Delta.ToolCalls {
						o.Text += tc.Function.Arguments
					}
				}
				if ch.Usage != nil {
					o.Usage = ch.Usage.TotalTokens
				}
				if kind == "chat-cancel" && o.Chunks == 2 {
					cancel()
					o.Terminal = "cancelled"
					break
				}
			}
		default:
			return o, fmt.Errorf("go-openai: no scenario %s", scenario)
		}
		return o, nil
	}}
}

// curlClient runs curl -N and reports the status, exit code and the
// number of SSE data events or NDJSON lines.
func curlClient() client {
	return client{name: "curl", run: func(ctx context.Context, base, scenario string) (outcome, error) {
		kind, model := split(scenario)
		path, body := "/v1/chat/completions", `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		switch kind {
		case "chat-json":
			body = `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
		case "responses-stream":
			path, body = "/v1/responses", `{"model":"`+model+`","stream":true,"input":"hi"}`
		case "ollama-chat":
			path, body = "/api/chat", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, "curl", "-sS", "-N", "-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "-d", body, base+path)
		out, err := cmd.Output()
		o := outcome{Terminal: "ok"}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			o.Terminal = fmt.Sprintf("exit %d", ee.ExitCode())
		} else if err != nil {
			return o, err
		}
		s := string(out)
		i := strings.LastIndexByte(s, '\n')
		fmt.Sscanf(s[i+1:], "%d", &o.Status)
		for _, line := range strings.Split(s[:max(i, 0)], "\n") {
			if strings.HasPrefix(line, "data: ") || (kind == "ollama-chat" && strings.HasPrefix(line, "{")) {
				o.Chunks++
			}
		}
		return o, nil
	}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func classOf(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected EOF"):
		return "unexpected EOF"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	}
	return "error"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
