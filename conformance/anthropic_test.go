package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// anthropicOutcome is what anthropic.mjs prints.
type anthropicOutcome struct {
	Status   int    `json:"status"`
	Terminal string `json:"terminal"`
	Text     string `json:"text"`
	Events   int    `json:"events"`
	Input    int    `json:"input"`
	Output   int    `json:"output"`
	Stop     string `json:"stop"`
	Error    *struct {
		Class   string `json:"class"`
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Tool *struct {
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
		Stop  string         `json:"stop"`
	} `json:"tool"`
}

func runAnthropic(t *testing.T, base, key, scenario string) anthropicOutcome {
	t.Helper()
	var o anthropicOutcome
	runScript(t, 60*time.Second, "anthropic.mjs", &o, base, key, scenario)
	return o
}

// runScript runs a Node script of testdata/js and decodes the one JSON
// line it prints into out.
func runScript(t *testing.T, limit time.Duration, script string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = jsDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", script, args, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %v: decoding %q: %v", script, args, b, err)
	}
}

// TestAnthropicSDK drives iop's /v1/messages with the official Anthropic
// SDK (x-api-key, anthropic-version) against sim providers that serve
// the Messages API natively: a JSON answer and a stream with their usage
// and stop reason, tools and an image accepted, count_tokens, a client
// cancel, errors in Anthropic's shape (unknown model, a wrong key, a
// field a Chat-only model cannot take), translation for a model served
// by Chat only (text, a stream, a tool call and its result), a provider failing before
// its first byte replayed on another one, and a stream cut or stalled
// after commit ending with Anthropic's error event (the SDK raises it),
// never a tidy end.
func TestAnthropicSDK(t *testing.T) {
	if !fileExists(jsDir + "/node_modules/@anthropic-ai/sdk/package.json") {
		t.Fatal("the Anthropic SDK is not installed: run `npm ci --prefix conformance/testdata/js` (make test does)")
	}
	c := anthropicCluster(t)
	const key = "sk-ant-test"
	ok := func(o anthropicOutcome, scenario string) {
		t.Helper()
		if o.Terminal != "ok" || o.Status != 200 {
			t.Fatalf("%s: %+v", scenario, o)
		}
	}
	o := runAnthropic(t, c.URL, key, "text:claude-sim")
	ok(o, "text")
	if !strings.Contains(o.Text, "You said: hi") || o.Input == 0 || o.Output == 0 || o.Stop != "end_turn" {
		t.Fatalf("text: %+v", o)
	}
	o = runAnthropic(t, c.URL, key, "stream:claude-sim")
	ok(o, "stream")
	if !strings.Contains(o.Text, "You said: hi") || o.Events < 6 || o.Output == 0 || o.Stop != "end_turn" {
		t.Fatalf("stream: %+v", o)
	}
	for _, s := range []string{"tools:claude-sim", "image:claude-sim"} {
		ok(runAnthropic(t, c.URL, key, s), s)
	}
	if o = runAnthropic(t, c.URL, key, "count:claude-sim"); o.Terminal != "ok" || o.Input == 0 {
		t.Fatalf("count: %+v", o)
	}
	if o = runAnthropic(t, c.URL, key, "cancel:claude-sim"); o.Terminal != "cancelled" {
		t.Fatalf("cancel: %+v", o)
	}
	// Failover before commit: the first provider's 529 is replayed.
	if o = runAnthropic(t, c.URL, key, "text:flaky"); o.Terminal != "ok" || !strings.Contains(o.Text, "You said") {
		t.Fatalf("a 529 before the first byte must be replayed: %+v", o)
	}
	for _, tc := range []struct {
		scenario, key, class, typ string
		status                    int
	}{
		{"error:no-such-model", key, "NotFoundError", "not_found_error", 404},
		{"error:claude-sim", "sk-wrong", "AuthenticationError", "authentication_error", 401},
		{"thinking:chat-only", key, "BadRequestError", "invalid_request_error", 400},
	} {
		o := runAnthropic(t, c.URL, tc.key, tc.scenario)
		if o.Status != tc.status || o.Error == nil || o.Error.Class != tc.class || o.Error.Type != tc.typ {
			t.Errorf("%s: want %d %s %s, got %+v (%+v)", tc.scenario, tc.status, tc.class, tc.typ, o, o.Error)
		}
	}
	// A model served by Chat only: the request is translated (and its
	// answer rendered in Anthropic's format), a tool call streamed and
	// answered included; what Chat cannot express is a 400 naming it.
	for _, s := range []string{"text:chat-only", "stream:chat-only"} {
		if o := runAnthropic(t, c.URL, key, s); o.Terminal != "ok" || !strings.Contains(o.Text, "You said: hi") || o.Output == 0 || o.Stop != "end_turn" {
			t.Errorf("%s translated: %+v", s, o)
		}
	}
	if o := runAnthropic(t, c.URL, key, "agent:chat-only"); o.Terminal != "ok" || o.Tool == nil || o.Tool.Name != "weather" ||
		o.Tool.Stop != "tool_use" || o.Tool.Input["city"] != "weather in Paris?" || !strings.Contains(o.Text, "The tool returned: sunny") {
		t.Errorf("agent translated: %+v (tool %+v)", o, o.Tool)
	}
	if o := runAnthropic(t, c.URL, key, "thinking:chat-only"); o.Error == nil || !strings.Contains(o.Error.Message, "thinking") {
		t.Errorf("thinking on a Chat-only model must be refused naming the field: %+v", o.Error)
	}
	// After commit: a cut or a stall ends with Anthropic's error event,
	// which the SDK raises; never a complete-looking message.
	for _, s := range []string{"stream:cutter", "stream:staller"} {
		o := runAnthropic(t, c.URL, key, s)
		if o.Terminal != "error" || o.Error == nil || o.Stop != "" {
			t.Errorf("%s: a broken stream must end with the error event: %+v", s, o)
		}
	}
}

// TestAnthropicGoSDK is the same surface through the official Go SDK
// (anthropic-sdk-go): a message, a stream accumulated into one, and the
// error shape of an unknown model and of a stream cut after commit.
func TestAnthropicGoSDK(t *testing.T) {
	c := anthropicCluster(t)
	client := anthropic.NewClient(antoption.WithBaseURL(c.URL), antoption.WithAPIKey("sk-ant-test"), antoption.WithMaxRetries(0))
	ctx := t.Context()
	params := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	}
	msg, err := client.Messages.New(ctx, params("claude-sim"))
	if err != nil || len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "You said: hi") || msg.Usage.OutputTokens == 0 ||
		msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("message %+v: %v", msg, err)
	}
	stream := client.Messages.NewStreaming(ctx, params("claude-sim"))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || !strings.Contains(acc.Content[0].Text, "You said: hi") || acc.Usage.OutputTokens == 0 {
		t.Fatalf("stream %+v: %v", acc, err)
	}
	_, err = client.Messages.New(ctx, params("no-such-model"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.RawJSON(), "not_found_error") {
		t.Fatalf("unknown model: %v", err)
	}
	cut := client.Messages.NewStreaming(ctx, params("cutter"))
	for cut.Next() {
	}
	if cut.Err() == nil {
		t.Fatal("a stream cut after commit ended without an error")
	}
}

// TestAnthropicSDKListsModels: GET /v1/models and /v1/models/{id}, which
// Anthropic's API serves at OpenAI's paths in a shape of its own, answer
// the Anthropic SDK in that shape: the models the key may use, page by
// page as the SDK follows them (one a page here, so every cursor is
// used), a model retrieved, and an unknown model or a wrong key refused
// as the SDK's NotFoundError and AuthenticationError.
func TestAnthropicSDKListsModels(t *testing.T) {
	c := anthropicCluster(t)
	o := runAnthropic(t, c.URL, "sk-ant-test", "models:claude-sim")
	if o.Terminal != "ok" || o.Text != "chat-only,claude-sim,cutter,flaky,staller" || o.Events != 5 || o.Stop != "claude-sim|claude-sim|active" {
		t.Fatalf("models: %+v", o)
	}
	o = runAnthropic(t, c.URL, "sk-ant-test", "model:no-such-model")
	if o.Status != 404 || o.Error == nil || o.Error.Class != "NotFoundError" || o.Error.Type != "not_found_error" {
		t.Fatalf("an unknown model: %+v", o)
	}
	o = runAnthropic(t, c.URL, "sk-wrong", "models:claude-sim")
	if o.Status != 401 || o.Error == nil || o.Error.Class != "AuthenticationError" || o.Error.Type != "authentication_error" {
		t.Fatalf("a wrong key: %+v", o)
	}

	// The Go SDK's pager, two a page, and its Get.
	client := anthropic.NewClient(antoption.WithBaseURL(c.URL), antoption.WithAPIKey("sk-ant-test"), antoption.WithMaxRetries(0))
	var ids []string
	pager := client.Models.ListAutoPaging(t.Context(), anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for pager.Next() {
		ids = append(ids, pager.Current().ID)
	}
	if err := pager.Err(); err != nil || strings.Join(ids, ",") != "chat-only,claude-sim,cutter,flaky,staller" {
		t.Fatalf("the Go SDK's list: %v %v", ids, err)
	}
	info, err := client.Models.Get(t.Context(), "flaky", anthropic.ModelGetParams{})
	if err != nil || info.ID != "flaky" || info.DisplayName != "flaky" || info.CreatedAt.Unix() != 0 {
		t.Fatalf("the Go SDK's get: %+v %v", info, err)
	}
}

// anthropicCluster is an edge with one key (sk-ant-test) and sim
// providers serving the Messages API: claude-sim; flaky (a 529 first,
// then a healthy provider); cutter (cut after 3 tokens); staller (stalls
// after 3, 300 ms stall timeout); chat-only (declares only chat).
func anthropicCluster(t *testing.T) *e2e.Cluster {
	sim := func(id string, cfg nodeagent.SimConfig, models ...string) nodeagent.ProviderConfig {
		p := e2e.Sim(id, cfg)
		p.Models = models
		return p
	}
	return e2e.Start(t, e2e.Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team", SHA256: gateway.HashToken("sk-ant-test")}}
	}}, func(*e2e.Cluster) []e2e.NodeSpec {
		chatOnly := sim("chat-only", nodeagent.SimConfig{}, "chat-only")
		chatOnly.Surfaces = []string{"chat"}
		stall := sim("stall", nodeagent.SimConfig{StallAfter: 3}, "staller")
		stall.ResponseStallTimeoutMS = 300
		return []e2e.NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{
			sim("a", nodeagent.SimConfig{}, "claude-sim"),
			sim("flaky", nodeagent.SimConfig{ErrorStatus: 529, ErrorCount: 1}, "flaky"),
			sim("flaky-b", nodeagent.SimConfig{}, "flaky"),
			sim("cut", nodeagent.SimConfig{CutAfter: 3}, "cutter"),
			stall, chatOnly,
		}, Configure: func(nc *nodeagent.Config) { nc.Liveness.CloseGrace = 100 * time.Millisecond }}}
	})
}
