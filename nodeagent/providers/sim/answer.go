package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"

	"github.com/iopgw/iop/execution"
)

// answer is the deterministic output for one request: text tokens or a
// tool call, and the usage it reports.
type answer struct {
	tokens       []string // text tokens, each with its leading space
	toolName     string   // non-empty: answer with this tool call
	toolID       string
	toolArgs     []string // argument fragments
	finish       string
	stopSeq      string // the stop sequence the answer ended before ("" when none)
	promptTokens int64
}

// compose derives the answer from the request: the same request always
// gets the same answer.
func (p *Provider) compose(req *execution.RunRequest) answer {
	msgs := req.Messages
	var prefix string
	if n := len(msgs); req.Continuation && n > 0 && msgs[n-1].Role == "assistant" {
		// A continuation: the answer to the conversation before the
		// prefix, less the prefix (the sim accepts assistant prefill).
		prefix, msgs = msgs[n-1].Content, msgs[:n-1]
	}
	a := p.composeFor(msgs, req.Params)
	if prefix != "" {
		a.tokens = continueAfter(a.tokens, prefix)
	}
	return a
}

// continueAfter returns the part of tokens that follows prefix (split
// inside a token when the prefix ends there); all of tokens when the
// prefix is not theirs.
func continueAfter(tokens []string, prefix string) []string {
	full := strings.Join(tokens, "")
	if !strings.HasPrefix(full, prefix) {
		return tokens
	}
	var out []string
	n := len(prefix)
	for _, t := range tokens {
		switch {
		case n >= len(t):
			n -= len(t)
		case n > 0:
			out = append(out, t[n:])
			n = 0
		default:
			out = append(out, t)
		}
	}
	return out
}

// composeFor answers the conversation's last user message, or the tool
// result after it: not a system prompt, nor what the assistant said (a
// conversation of neither is greeted).
func (p *Provider) composeFor(msgs []execution.Message, params execution.GenerationParams) answer {
	a := answer{finish: "stop"}
	var last execution.Message
	for _, m := range msgs {
		a.promptTokens += int64(len(strings.Fields(m.Content)))
		if m.Role == "user" || m.Role == "tool" {
			last = m
		}
	}
	if tool, ok := chosenTool(params); ok && last.Role == "user" {
		h := fnv.New32a()
		h.Write([]byte(last.Content))
		a.toolName, a.toolID = tool.name, fmt.Sprintf("call_%08x", h.Sum32())
		s := string(toolArguments(tool.schema, firstWords(last.Content, 5)))
		a.toolArgs = []string{s[:len(s)/3], s[len(s)/3 : 2*len(s)/3], s[2*len(s)/3:]}
		a.finish = "tool_calls"
		return a
	}
	var text string
	switch {
	case last.Role == "tool":
		text = "The tool returned: " + firstWords(last.Content, 12) + "."
	case strings.TrimSpace(last.Content) == "":
		text = "Hello from iop-sim, the built-in simulated model."
	default:
		text = "You said: " + firstWords(last.Content, 8) + ". This answer comes from iop-sim, the built-in simulated model."
	}
	if structured, ok := structuredAnswer(params.ResponseFormat, text, firstWords(last.Content, 5)); ok {
		a.tokens = chunks(structured, 16)
		return a.limited(p.cfg.MaxTokens, params.MaxTokens)
	}
	a.tokens, a.stopSeq = stopAt(tokenize(text), params.Stop)
	return a.limited(p.cfg.MaxTokens, params.MaxTokens)
}

// limited cuts the answer at the output limit (the sim's, or the
// request's when lower), finishing with length.
func (a answer) limited(limit int, asked *int64) answer {
	if asked != nil && int(*asked) < limit {
		limit = int(*asked)
	}
	if len(a.tokens) > limit {
		a.tokens, a.finish = a.tokens[:limit], "length"
	}
	return a
}

// stopAt ends tokens where the first of the stop sequences begins, as
// a server honouring `stop` does: the text before it, without it (a
// token it begins in is cut there), and the sequence.
func stopAt(tokens []string, stop []string) ([]string, string) {
	full := strings.Join(tokens, "")
	end, matched := len(full), ""
	for _, s := range stop {
		if i := strings.Index(full, s); s != "" && i >= 0 && i < end {
			end, matched = i, s
		}
	}
	if matched == "" {
		return tokens, ""
	}
	var out []string
	for _, t := range tokens {
		if end <= 0 {
			break
		}
		if len(t) > end {
			t = t[:end]
		}
		out = append(out, t)
		end -= len(t)
	}
	return out, matched
}

func (a answer) steps() int {
	if a.toolName != "" {
		return len(a.toolArgs)
	}
	return len(a.tokens)
}

// event returns the delta event of step i.
func (a answer) event(i int) execution.RunEvent {
	if a.toolName == "" {
		return execution.RunEvent{Type: execution.EventTypeDelta, Delta: a.tokens[i]}
	}
	tc := execution.ToolCallDelta{Index: 0, Arguments: a.toolArgs[i]}
	if i == 0 {
		tc.ID, tc.Name = a.toolID, a.toolName
	}
	return execution.RunEvent{Type: execution.EventTypeDelta, ToolCalls: []execution.ToolCallDelta{tc}}
}

func (a answer) usage() *execution.TokenUsage {
	out := int64(a.steps())
	return &execution.TokenUsage{PromptTokens: a.promptTokens, CompletionTokens: out, TotalTokens: a.promptTokens + out}
}

func tokenize(s string) []string {
	words := strings.Fields(s)
	out := make([]string, len(words))
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		out[i] = w
	}
	return out
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) > n {
		w = append(w[:n], "…")
	}
	return strings.Join(w, " ")
}

// upstreamError is the scripted error answer for status.
func upstreamError(status int) *execution.UpstreamError {
	ue := &execution.UpstreamError{Status: status, Type: "server_error", Message: http.StatusText(status)}
	switch {
	case status == http.StatusTooManyRequests:
		ue.Type, ue.Code, ue.RetryAfterMS = "rate_limit_error", "rate_limit_exceeded", 1000
		ue.Message = "Rate limit reached for iop-sim. Please try again in 1s."
	case status == http.StatusServiceUnavailable:
		ue.Type, ue.Code, ue.Message = "service_unavailable_error", "server_is_overloaded", "The engine is currently overloaded, please try again later."
	case status == http.StatusBadRequest:
		ue.Type, ue.Code, ue.Param = "invalid_request_error", "context_length_exceeded", "messages"
		ue.Message = "This model's maximum context length is 8192 tokens. Please reduce the length of the messages."
	case status >= 400 && status < 500:
		ue.Type = "invalid_request_error"
	}
	return ue
}

// errCut is the abrupt end of a cut stream.
var errCut = errors.New("connection reset by peer")

// Execute implements [execution.Provider].
func (p *Provider) Execute(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
	pl := p.nextPlan()
	if pl.errorStatus != 0 {
		ue := upstreamError(pl.errorStatus)
		emit.Emit(execution.RunEvent{Type: execution.EventTypeError, Error: ue.Message, Failure: execution.UpstreamFailure(ue)})
		return nil
	}
	if e := cmp.Or(logprobsRefusal(req.ChatBody), reasoningRefusal(req.ChatBody), outputRefusal(req.ChatBody), toolChoiceRefusal(req.Params)); e != nil {
		ue := &execution.UpstreamError{Status: e.Status, Type: e.Type, Param: e.Param, Message: e.Message}
		emit.Emit(execution.RunEvent{Type: execution.EventTypeError, Error: ue.Message, Failure: execution.UpstreamFailure(ue)})
		return nil
	}
	emit.Emit(execution.RunEvent{Type: execution.EventTypeStart, Model: req.Model})
	a := p.compose(req)
	if err := sleep(ctx, p.cfg.FirstTokenDelay); err != nil {
		return err
	}
	for i := 0; i < a.steps(); i++ {
		if err := p.beforeStep(ctx, pl, i); err != nil {
			return err
		}
		emit.Emit(a.event(i))
	}
	emit.Emit(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: a.finish, Usage: a.usage()})
	return nil
}

// beforeStep applies the plan's faults and the token latency before step i.
func (p *Provider) beforeStep(ctx context.Context, pl plan, i int) error {
	if i > 0 {
		if err := sleep(ctx, p.cfg.TokenLatency); err != nil {
			return err
		}
	}
	switch i {
	case pl.stallAt:
		return p.stall(ctx)
	case pl.cutAt:
		return execution.UpstreamFailure(&execution.UpstreamError{Message: errCut.Error()})
	case pl.malformedAt:
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "malformed chunk from upstream"})
	}
	return nil
}
