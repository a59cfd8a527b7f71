package eventstream

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/iopgw/iop/execution"
)

// Dialect is the API whose events a stream carries.
type Dialect int

// The dialects.
const (
	// DialectChat: OpenAI Chat Completions or legacy Completions chunks
	// (choices, finish_reason, usage), ended by data: [DONE].
	DialectChat Dialect = iota
	// DialectResponses: OpenAI Responses events, typed by their "type".
	DialectResponses
	// DialectOllama: Ollama's NDJSON lines, ended by "done": true.
	DialectOllama
)

// FormatFor returns the framing of a content type and whether it is a
// stream at all.
func FormatFor(contentType string) (Format, bool) {
	ct := strings.ToLower(contentType)
	switch {
	case strings.Contains(ct, "event-stream"):
		return FormatSSE, true
	case strings.Contains(ct, "ndjson"):
		return FormatNDJSON, true
	}
	return FormatSSE, false
}

// Observer follows a stream of one dialect as it passes by and records
// what the gateway needs to know of it: whether the stream's own terminal
// arrived, an error event and its fields, tool-call output, the last
// reported usage and (Responses) the largest sequence number. It decodes
// only those fields of each event's JSON.
type Observer struct {
	dialect Dialect
	r       *Reader

	// Events counts dispatched events (comments are not events).
	Events int
	// Done: the stream's own successful terminal arrived ([DONE], every
	// choice finished, a terminal Responses event, "done": true).
	Done bool
	// Err is the first error event, if any (also a terminal).
	Err *execution.UpstreamError
	// FirstIsError: the first event was an error event.
	FirstIsError bool
	// ToolCall: the stream carried tool-call output.
	ToolCall bool
	// Usage is the last usage the stream reported; nil when none was.
	Usage *execution.TokenUsage
	// Malformed counts events whose data was not the JSON expected.
	Malformed int
	// Seq is the largest Responses sequence_number seen; SeqSeen whether
	// any was.
	Seq     int64
	SeqSeen bool

	open map[int]bool // chat: choice indexes without a finish_reason yet
}

// NewObserver returns an observer of a stream in format f.
func NewObserver(d Dialect, f Format) *Observer {
	return &Observer{dialect: d, r: NewReader(f, 0)}
}

// Feed observes p.
func (o *Observer) Feed(p []byte) { o.r.Feed(p, o.event) }

// Close observes the end of the stream.
func (o *Observer) Close() { o.r.Close(o.event) }

// Terminal reports whether the stream carried its own terminal: a
// success end or an error event.
func (o *Observer) Terminal() bool { return o.Done || o.Err != nil }

// NextSeq is the sequence_number an event appended to a Responses stream
// takes.
func (o *Observer) NextSeq() int64 {
	if !o.SeqSeen {
		return 0
	}
	return o.Seq + 1
}

func (o *Observer) event(ev Event) {
	o.Events++
	if ev.Oversize {
		o.Malformed++
		return
	}
	switch o.dialect {
	case DialectResponses:
		o.responses(ev)
	case DialectOllama:
		o.ollama(ev.Data)
	default:
		o.chat(ev.Data)
	}
}

func (o *Observer) setErr(ue *execution.UpstreamError) {
	if o.Err == nil {
		o.Err = ue
		o.FirstIsError = o.Events == 1
	}
}

type chatChunk struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    any             `json:"code"`
	Choices []struct {
		Index        int     `json:"index"`
		FinishReason *string `json:"finish_reason"`
		Delta        struct {
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

func (o *Observer) chat(data []byte) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		o.Done = true
		return
	}
	var c chatChunk
	if json.Unmarshal(data, &c) != nil {
		o.Malformed++
		return
	}
	if ue := chunkError(&c); ue != nil {
		o.setErr(ue)
		return
	}
	if c.Usage != nil {
		o.Usage = c.Usage.TokenUsage()
	}
	if o.open == nil {
		o.open = map[int]bool{}
	}
	for _, ch := range c.Choices {
		if nonEmpty(ch.Delta.ToolCalls) || nonEmpty(ch.Delta.FunctionCall) {
			o.ToolCall = true
		}
		if _, seen := o.open[ch.Index]; !seen {
			o.open[ch.Index] = true
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			o.open[ch.Index] = false
		}
	}
	if len(c.Choices) > 0 && allFinished(o.open) {
		o.Done = true
	}
}

func allFinished(open map[int]bool) bool {
	for _, v := range open {
		if v {
			return false
		}
	}
	return true
}

// chunkError reads an error event: {"error":{…}} or {"error":"…"}, and
// the top-level {"object":"error",…} some servers write.
func chunkError(c *chatChunk) *execution.UpstreamError {
	if nonEmpty(c.Error) {
		return ParseErrorObject(c.Error)
	}
	if c.Object == "error" {
		ue := &execution.UpstreamError{Message: c.Message, Type: c.Type, Code: codeString(c.Code)}
		ue.Status = StatusOf(ue.Type, ue.Code)
		return ue
	}
	return nil
}

type responsesEvent struct {
	Type     string `json:"type"`
	Sequence *int64 `json:"sequence_number"`
	Item     *struct {
		Type string `json:"type"`
	} `json:"item"`
	Response *struct {
		Usage *Usage `json:"usage"`
		Error *struct {
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"response"`
	// error events
	Code    any             `json:"code"`
	Message string          `json:"message"`
	Param   any             `json:"param"`
	Error   json.RawMessage `json:"error"`
}

func (o *Observer) responses(ev Event) {
	var e responsesEvent
	if json.Unmarshal(ev.Data, &e) != nil {
		o.Malformed++
		return
	}
	if e.Sequence != nil && (!o.SeqSeen || *e.Sequence > o.Seq) {
		o.Seq, o.SeqSeen = *e.Sequence, true
	}
	typ := e.Type
	if typ == "" {
		typ = ev.Name
	}
	if e.Item != nil && strings.HasSuffix(e.Item.Type, "_call") {
		o.ToolCall = true
	}
	if strings.HasPrefix(typ, "response.function_call_arguments.") {
		o.ToolCall = true
	}
	if e.Response != nil && e.Response.Usage != nil {
		o.Usage = e.Response.Usage.TokenUsage()
	}
	switch typ {
	case "response.completed", "response.incomplete":
		o.Done = true
	case "response.failed":
		ue := &execution.UpstreamError{Message: "the response failed", Status: 500}
		if e.Response != nil && e.Response.Error != nil {
			ue.Code, ue.Message = codeString(e.Response.Error.Code), e.Response.Error.Message
		}
		o.setErr(ue)
	case "error":
		if nonEmpty(e.Error) {
			o.setErr(ParseErrorObject(e.Error))
			return
		}
		ue := &execution.UpstreamError{Message: e.Message, Code: codeString(e.Code), Param: codeString(e.Param)}
		ue.Status = StatusOf("", ue.Code)
		o.setErr(ue)
	}
}

type ollamaLine struct {
	Done            bool            `json:"done"`
	Error           json.RawMessage `json:"error"`
	PromptEvalCount *int64          `json:"prompt_eval_count"`
	EvalCount       *int64          `json:"eval_count"`
	Message         *struct {
		ToolCalls json.RawMessage `json:"tool_calls"`
	} `json:"message"`
}

func (o *Observer) ollama(data []byte) {
	var l ollamaLine
	if json.Unmarshal(data, &l) != nil {
		o.Malformed++
		return
	}
	if nonEmpty(l.Error) {
		o.setErr(ParseErrorObject(l.Error))
		return
	}
	if l.Message != nil && nonEmpty(l.Message.ToolCalls) && string(bytes.TrimSpace(l.Message.ToolCalls)) != "[]" {
		o.ToolCall = true
	}
	if u := ollamaUsage(l.PromptEvalCount, l.EvalCount); u != nil {
		o.Usage = u
	}
	if l.Done {
		o.Done = true
	}
}

func ollamaUsage(prompt, eval *int64) *execution.TokenUsage {
	if prompt == nil && eval == nil {
		return nil
	}
	u := &execution.TokenUsage{}
	if prompt != nil {
		u.PromptTokens = *prompt
	}
	if eval != nil {
		u.CompletionTokens = *eval
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// ParseErrorObject reads the value of an "error" member: an OpenAI error
// object or a plain string (Ollama). Its status is inferred from the
// error's type or code, since an error event inside a 200 stream has no
// status of its own.
func ParseErrorObject(raw json.RawMessage) *execution.UpstreamError {
	ue := &execution.UpstreamError{}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
		Param   any    `json:"param"`
	}
	var s string
	switch {
	case json.Unmarshal(raw, &obj) == nil:
		ue.Message, ue.Type, ue.Code, ue.Param = obj.Message, obj.Type, codeString(obj.Code), codeString(obj.Param)
	case json.Unmarshal(raw, &s) == nil:
		ue.Message = s
	}
	if ue.Message == "" {
		ue.Message = NoMessage
	}
	ue.Status = StatusOf(ue.Type, ue.Code)
	return ue
}

// NoMessage is the message of an error object that had none.
const NoMessage = "the provider reported an error"

// StatusOf infers the HTTP status class of an error reported without one
// (an error event inside a 200 stream) from its OpenAI type or code: a
// numeric code in 400–599 is taken as is; client-error types map to their
// 4xx; anything else is a 500 (the provider failed).
func StatusOf(typ, code string) int {
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
		return n
	}
	t := strings.ToLower(typ)
	c := strings.ToLower(code)
	switch {
	case c == "context_length_exceeded", c == "invalid_request_error", strings.Contains(t, "invalid_request"), strings.Contains(t, "badrequest"),
		strings.Contains(t, "bad_request"), c == "content_filter", c == "content_policy_violation":
		return 400
	case strings.Contains(t, "authentication"), c == "invalid_api_key":
		return 401
	case strings.Contains(t, "permission"):
		return 403
	case strings.Contains(t, "not_found"), strings.Contains(t, "notfound"), c == "model_not_found":
		return 404
	case strings.Contains(t, "rate_limit"), strings.Contains(c, "rate_limit"), c == "insufficient_quota":
		return 429
	case strings.Contains(t, "overloaded"), strings.Contains(t, "unavailable"):
		return 503
	}
	return 500
}

func codeString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func nonEmpty(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}
