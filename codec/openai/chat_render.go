package openai

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// ChatStream renders one execution as chat.completion.chunk SSE events.
// It holds the assistant role chunk back until the first output, so
// nothing is written to the client before the provider makes progress
// (the commit point). One per request; not safe for concurrent use.
type ChatStream struct {
	ID           string
	Model        string
	Created      int64
	IncludeUsage bool
	// Fingerprint and ServiceTier are the upstream's, when it reported them.
	Fingerprint string
	ServiceTier string

	started  bool
	sawTools bool
	toolIDs  map[int]bool
	usage    *execution.TokenUsage
}

// NewChatStream returns a renderer for one stream.
func NewChatStream(id, model string, created int64, includeUsage bool) *ChatStream {
	return &ChatStream{ID: id, Model: model, Created: created, IncludeUsage: includeUsage, toolIDs: map[int]bool{}}
}

// answerHead is the identity every Chat answer carries, chunk or
// completion.
type answerHead struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	Model       string `json:"model"`
	Fingerprint string `json:"system_fingerprint,omitempty"`
	ServiceTier string `json:"service_tier,omitempty"`
}

type chunkWire struct {
	answerHead
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        deltaWire `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type deltaWire struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []toolDeltaWire `json:"tool_calls,omitempty"`
}

type toolDeltaWire struct {
	Index    int        `json:"index"`
	ID       string     `json:"id,omitempty"`
	Type     string     `json:"type,omitempty"`
	Function toolFnWire `json:"function"`
}

type toolFnWire struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// UsageWire is CompletionUsage.
type UsageWire struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// CompletionUsage converts u (nil gives zeros).
func CompletionUsage(u *execution.TokenUsage) UsageWire {
	var w UsageWire
	if u == nil {
		return w
	}
	w.PromptTokens, w.CompletionTokens, w.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
	if w.TotalTokens == 0 {
		w.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	w.PromptTokensDetails.CachedTokens = u.CachedTokens
	w.CompletionTokensDetails.ReasoningTokens = u.ReasoningTokens
	return w
}

var nullJSON = json.RawMessage("null")

// head is the stream's identity, as every chunk carries it.
func (s *ChatStream) head() answerHead {
	return answerHead{ID: s.ID, Object: "chat.completion.chunk", Created: s.Created, Model: s.Model, Fingerprint: s.Fingerprint,
		ServiceTier: s.ServiceTier}
}

// chunk renders one chunk as an SSE event. It is a translated stream's
// hot path, so it appends the JSON directly (no reflection); the bytes
// are exactly those of sseData(chunkWire{…}) (TestChunkMatchesReflection).
func (s *ChatStream) chunk(d deltaWire, finish *string) []byte {
	b := make([]byte, 0, 256+len(s.ID)+len(s.Model)+len(d.ReasoningContent)+len(deref(d.Content)))
	b = append(b, `data: {"id":`...)
	b = jsonstrict.AppendString(b, s.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = jsonstrict.AppendInt(b, s.Created)
	b = append(b, `,"model":`...)
	b = jsonstrict.AppendString(b, s.Model)
	b = appendOptional(b, `,"system_fingerprint":`, s.Fingerprint)
	b = appendOptional(b, `,"service_tier":`, s.ServiceTier)
	b = append(b, `,"choices":[{"index":0,"delta":{`...)
	sep := ""
	if d.Role != "" {
		b = jsonstrict.AppendString(append(b, `"role":`...), d.Role)
		sep = ","
	}
	if d.Content != nil {
		b = jsonstrict.AppendString(append(append(b, sep...), `"content":`...), *d.Content)
		sep = ","
	}
	if d.ReasoningContent != "" {
		b = jsonstrict.AppendString(append(append(b, sep...), `"reasoning_content":`...), d.ReasoningContent)
		sep = ","
	}
	if len(d.ToolCalls) > 0 {
		calls, _ := jsonstrict.Marshal(d.ToolCalls)
		b = append(append(append(b, sep...), `"tool_calls":`...), calls...)
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish != nil {
		b = jsonstrict.AppendString(b, *finish)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}]"...)
	if s.IncludeUsage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

// appendOptional appends key and v unless v is empty (omitempty).
func appendOptional(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return jsonstrict.AppendString(append(b, key...), v)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sseData(v any) []byte {
	b, _ := jsonstrict.Marshal(v)
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, '\n', '\n')
}

// Started reports whether any event was rendered (the response committed).
func (s *ChatStream) Started() bool { return s.started }

// Append appends the SSE bytes that ev produces to dst. Start and usage
// events produce nothing; a complete event produces the finish chunk, the
// usage chunk when include_usage was asked, and data: [DONE]. Error and
// cancelled events produce nothing: the caller decides the terminal
// (AppendError).
func (s *ChatStream) Append(dst []byte, ev execution.RunEvent) []byte {
	switch ev.Type {
	case execution.EventTypeStart:
		if !s.started {
			s.applyStart(ev)
		}
	case execution.EventTypeUsage:
		s.usage = ev.Usage
	case execution.EventTypeDelta, execution.EventTypeMessage:
		if ev.Usage != nil {
			s.usage = ev.Usage
		}
		dst = s.appendContent(dst, ev)
	case execution.EventTypeComplete:
		if ev.Usage != nil {
			s.usage = ev.Usage
		}
		dst = s.appendFinish(dst, ev.FinishReason)
	}
	return dst
}

// applyStart keeps what the upstream reported of the answer's identity.
func (s *ChatStream) applyStart(ev execution.RunEvent) {
	if ev.Model != "" {
		s.Model = ev.Model
	}
	if ev.ResponseID != "" {
		s.ID = ev.ResponseID
	}
	if ev.Created != 0 {
		s.Created = ev.Created
	}
	if ev.SystemFingerprint != "" {
		s.Fingerprint = ev.SystemFingerprint
	}
	if ev.ServiceTier != "" {
		s.ServiceTier = ev.ServiceTier
	}
}

func (s *ChatStream) appendRole(dst []byte) []byte {
	if s.started {
		return dst
	}
	s.started = true
	empty := ""
	return append(dst, s.chunk(deltaWire{Role: "assistant", Content: &empty}, nil)...)
}

func (s *ChatStream) appendContent(dst []byte, ev execution.RunEvent) []byte {
	text := ev.Delta
	if ev.Type == execution.EventTypeMessage {
		text = ev.Message
	}
	if text == "" && ev.Reasoning == "" && len(ev.ToolCalls) == 0 {
		return dst
	}
	dst = s.appendRole(dst)
	if ev.Reasoning != "" {
		dst = append(dst, s.chunk(deltaWire{ReasoningContent: ev.Reasoning}, nil)...)
	}
	if text != "" {
		dst = append(dst, s.chunk(deltaWire{Content: &text}, nil)...)
	}
	if len(ev.ToolCalls) > 0 {
		s.sawTools = true
		calls := make([]toolDeltaWire, 0, len(ev.ToolCalls))
		for _, tc := range ev.ToolCalls {
			w := toolDeltaWire{Index: tc.Index, Function: toolFnWire{Arguments: tc.Arguments}}
			if !s.toolIDs[tc.Index] {
				s.toolIDs[tc.Index] = true
				w.ID, w.Type, w.Function.Name = tc.ID, "function", tc.Name
			}
			calls = append(calls, w)
		}
		dst = append(dst, s.chunk(deltaWire{ToolCalls: calls}, nil)...)
	}
	return dst
}

func (s *ChatStream) finishReason(reason string) string {
	if reason == "" {
		reason = "stop"
		if s.sawTools {
			reason = "tool_calls"
		}
	}
	return reason
}

func (s *ChatStream) appendFinish(dst []byte, reason string) []byte {
	dst = s.appendRole(dst)
	r := s.finishReason(reason)
	dst = append(dst, s.chunk(deltaWire{}, &r)...)
	if s.IncludeUsage && s.usage != nil {
		// Only usage the upstream reported: an invented zero is a lie.
		u, _ := jsonstrict.Marshal(CompletionUsage(s.usage))
		dst = append(dst, sseData(chunkWire{answerHead: s.head(), Choices: []chunkChoice{}, Usage: u})...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// AppendError appends the in-band error event that ends a committed chat
// stream: data: {"error":{...}}.
func (s *ChatStream) AppendError(dst []byte, e *Error) []byte {
	return append(dst, e.SSE()...)
}

// ChatAccumulator collects an execution into one chat.completion object.
type ChatAccumulator struct {
	ID          string
	Model       string
	Created     int64
	Fingerprint string
	ServiceTier string

	text      strings.Builder
	reasoning strings.Builder
	tools     map[int]*toolAcc
	finish    string
	usage     *execution.TokenUsage
}

type toolAcc struct {
	id, name string
	args     strings.Builder
}

// NewChatAccumulator returns an accumulator.
func NewChatAccumulator(id, model string, created int64) *ChatAccumulator {
	return &ChatAccumulator{ID: id, Model: model, Created: created, tools: map[int]*toolAcc{}}
}

// Add folds ev into the accumulated answer.
func (a *ChatAccumulator) Add(ev execution.RunEvent) {
	if ev.Usage != nil {
		a.usage = ev.Usage
	}
	switch ev.Type {
	case execution.EventTypeStart:
		s := ChatStream{Model: a.Model, ID: a.ID, Created: a.Created, Fingerprint: a.Fingerprint, ServiceTier: a.ServiceTier}
		s.applyStart(ev)
		a.Model, a.ID, a.Created, a.Fingerprint, a.ServiceTier = s.Model, s.ID, s.Created, s.Fingerprint, s.ServiceTier
	case execution.EventTypeDelta, execution.EventTypeMessage:
		a.text.WriteString(ev.Delta)
		a.text.WriteString(ev.Message)
		a.reasoning.WriteString(ev.Reasoning)
		for _, tc := range ev.ToolCalls {
			t := a.tools[tc.Index]
			if t == nil {
				t = &toolAcc{}
				a.tools[tc.Index] = t
			}
			if tc.ID != "" {
				t.id = tc.ID
			}
			if tc.Name != "" {
				t.name = tc.Name
			}
			t.args.WriteString(tc.Arguments)
		}
	case execution.EventTypeComplete:
		a.finish = ev.FinishReason
	}
}

// Text returns the accumulated assistant text.
func (a *ChatAccumulator) Text() string { return a.text.String() }

// HasToolCalls reports whether the answer contains tool calls.
func (a *ChatAccumulator) HasToolCalls() bool { return len(a.tools) > 0 }

type completionWire struct {
	answerHead
	Choices []completionChoice `json:"choices"`
	Usage   *UsageWire         `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int        `json:"index"`
	Message      messageOut `json:"message"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason string     `json:"finish_reason"`
}

type messageOut struct {
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	Refusal          *string       `json:"refusal"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
	Annotations      []struct{}    `json:"annotations"`
}

type toolCallOut struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function toolFnWire `json:"function"`
}

// Body renders the chat.completion JSON.
func (a *ChatAccumulator) Body() []byte {
	msg := messageOut{Role: "assistant", ReasoningContent: a.reasoning.String(), Annotations: []struct{}{}}
	if text := a.text.String(); text != "" || len(a.tools) == 0 {
		msg.Content = &text
	}
	idx := make([]int, 0, len(a.tools))
	for i := range a.tools {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		t := a.tools[i]
		msg.ToolCalls = append(msg.ToolCalls, toolCallOut{ID: t.id, Type: "function", Function: toolFnWire{Name: t.name, Arguments: t.args.String()}})
	}
	finish := a.finish
	if finish == "" {
		finish = "stop"
		if len(a.tools) > 0 {
			finish = "tool_calls"
		}
	}
	c := completionWire{answerHead: answerHead{ID: a.ID, Object: "chat.completion", Created: a.Created, Model: a.Model,
		Fingerprint: a.Fingerprint, ServiceTier: a.ServiceTier}, Choices: []completionChoice{{Index: 0, Message: msg, FinishReason: finish}}}
	if a.usage != nil {
		u := CompletionUsage(a.usage)
		c.Usage = &u
	}
	b, _ := jsonstrict.Marshal(c)
	return b
}
