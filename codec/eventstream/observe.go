package eventstream

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

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
	// DialectAnthropic: Anthropic Messages events, typed by their "type",
	// ended by message_stop (or an error event).
	DialectAnthropic
	// DialectAudio: OpenAI's media streams (transcript.text.*,
	// speech.audio.*, image_generation.*, image_edit.*), ended by their
	// *.done or *.completed event.
	DialectAudio
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
	// Ended: the stream's own end marker arrived ([DONE], a terminal
	// Responses event, "done": true, message_stop): nothing the client
	// needs follows it. (Done may hold without it, once every choice of a
	// Chat stream finished.)
	Ended bool
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
	// Output is the generated output the stream carried (for an estimate
	// of its usage when it reports none).
	Output Output
	// ResponseID is a Responses stream's response id (its events'
	// response.id); "" when none was seen or it was implausibly long.
	ResponseID string

	open openChoices      // chat: choice indexes, and which lack a finish_reason yet
	memo chatMemo         // chat: the last chunks' head and template (chatMemo)
	msgs msgsUsage        // anthropic: usage of message_start, updated by message_delta
	p    *fastjson.Parser // an event's, from eventParsers while it is observed
	// treeOnly: every Chat chunk is parsed (tests compare scanChat's
	// reading with the tree's).
	treeOnly bool
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

// eventParsers parse events: a held stream keeps no parser between its
// events.
var eventParsers fastjson.ParserPool

func (o *Observer) event(ev Event) {
	o.Events++
	if ev.Oversize {
		o.Malformed++
		return
	}
	defer o.release()
	switch o.dialect {
	case DialectResponses:
		o.responses(ev)
	case DialectOllama:
		o.ollama(ev.Data)
	case DialectAnthropic:
		o.anthropic(ev)
	case DialectAudio:
		o.audio(ev)
	default:
		o.chat(ev.Data)
	}
}

// release returns the event's parser, if it took one.
func (o *Observer) release() {
	if o.p != nil {
		eventParsers.Put(o.p)
		o.p = nil
	}
}

func (o *Observer) setErr(ue *execution.UpstreamError) {
	if o.Err == nil {
		o.Err = ue
		o.FirstIsError = o.Events == 1
	}
}

// object parses data with the event's parser: nil when data
// is not a JSON object (or null, an empty one), counted as malformed.
// The value is valid until the next call.
func (o *Observer) object(data []byte) (*fastjson.Value, bool) {
	if o.p == nil {
		o.p = eventParsers.Get()
	}
	v, err := o.p.ParseBytes(data)
	if err != nil {
		o.Malformed++
		return nil, false
	}
	switch v.Type() {
	case fastjson.TypeObject:
		return v, true
	case fastjson.TypeNull:
		return nil, true
	}
	o.Malformed++
	return nil, false
}

func (o *Observer) chat(data []byte) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		o.Done, o.Ended = true, true
		return
	}
	if !o.treeOnly {
		var k chatScan
		if o.memo.scan(data, &k) {
			o.chatScanned(k.choices[:k.n])
			return
		}
	}
	c, ok := o.object(data)
	if !ok || c == nil {
		return
	}
	k := readChatChunk(c)
	if ue := k.error(c); ue != nil {
		o.setErr(ue)
		return
	}
	if present(k.usage) {
		o.Usage = usageOf(k.usage)
	}
	choices := k.choices.GetArray()
	output := 0
	for _, ch := range choices {
		cc := readChatChoice(ch, false)
		output += cc.output
		if cc.toolCall {
			o.ToolCall = true
		}
		o.open.see(cc.index, cc.finished)
	}
	o.Output.event(output)
	if len(choices) > 0 && o.open.allFinished() {
		o.Done = true
	}
}

// chatScanned records a chunk scanChat read: its choices' output and
// finish state, as chat records a parsed chunk's.
func (o *Observer) chatScanned(choices []scannedChoice) {
	output := 0
	for _, ch := range choices {
		output += ch.output
		o.open.see(ch.index, ch.finished)
	}
	o.Output.event(output)
	if len(choices) > 0 && o.open.allFinished() {
		o.Done = true
	}
}

// chatChunk is what the observer reads of a chunk's top level, in one
// pass over its members (as with a lookup, the first of duplicated
// members counts).
type chatChunk struct {
	err, usage, choices *fastjson.Value
	objectError         bool // "object": "error"
}

func readChatChunk(c *fastjson.Value) (k chatChunk) {
	obj, err := c.Object()
	if err != nil {
		return k
	}
	var seen members
	obj.Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "error":
			if seen.first(0) {
				k.err = v
			}
		case "object":
			if seen.first(1) {
				k.objectError = string(v.GetStringBytes()) == "error"
			}
		case "usage":
			if seen.first(2) {
				k.usage = v
			}
		case "choices":
			if seen.first(3) {
				k.choices = v
			}
		}
	})
	return k
}

// error is the chunk's error event, as chunkError reads it.
func (k chatChunk) error(c *fastjson.Value) *execution.UpstreamError {
	if present(k.err) {
		return ParseErrorObject(k.err.MarshalTo(nil))
	}
	if k.objectError {
		return objectError(c)
	}
	return nil
}

// openChoices are a Chat stream's choice indexes in the order first seen,
// each with whether it is still without a finish_reason. A stream has
// one choice, or n: a slice scans faster than a map hashes.
type openChoices []openChoice

type openChoice struct {
	index int
	open  bool
}

// see records a choice's chunk: seen first, it is open until a chunk
// carries its finish_reason.
func (oc *openChoices) see(index int, finished bool) {
	for i := range *oc {
		if (*oc)[i].index == index {
			if finished {
				(*oc)[i].open = false
			}
			return
		}
	}
	*oc = append(*oc, openChoice{index: index, open: !finished})
}

func (oc openChoices) allFinished() bool {
	for _, c := range oc {
		if c.open {
			return false
		}
	}
	return true
}

// chunkError reads an error event: {"error":{…}} or {"error":"…"}, and
// the top-level {"object":"error",…} some servers write.
func chunkError(c *fastjson.Value) *execution.UpstreamError {
	if e := c.Get("error"); present(e) {
		return ParseErrorObject(e.MarshalTo(nil))
	}
	if string(c.GetStringBytes("object")) == "error" {
		return objectError(c)
	}
	return nil
}

// objectError reads a top-level {"object":"error",…}.
func objectError(c *fastjson.Value) *execution.UpstreamError {
	ue := &execution.UpstreamError{Message: string(c.GetStringBytes("message")), Type: string(c.GetStringBytes("type")), Code: valueString(c.Get("code"))}
	ue.Status = StatusOf(ue.Type, ue.Code)
	return ue
}

func (o *Observer) responses(ev Event) {
	e, ok := o.object(ev.Data)
	if !ok || e == nil {
		return
	}
	if seq := e.Get("sequence_number"); seq != nil && seq.Type() == fastjson.TypeNumber {
		if n := seq.GetInt64(); !o.SeqSeen || n > o.Seq {
			o.Seq, o.SeqSeen = n, true
		}
	}
	typ := string(e.GetStringBytes("type"))
	if typ == "" {
		typ = ev.Name
	}
	if strings.HasSuffix(string(e.GetStringBytes("item", "type")), "_call") || strings.HasPrefix(typ, "response.function_call_arguments.") {
		o.ToolCall = true
	}
	if u := e.Get("response", "usage"); present(u) {
		o.Usage = usageOf(u)
	}
	if o.ResponseID == "" {
		o.ResponseID = boundedID(e.GetStringBytes("response", "id"))
	}
	o.Output.event(responsesOutput(typ, e))
	switch typ {
	case "response.completed", "response.incomplete":
		o.Done, o.Ended = true, true
	case "response.failed":
		ue := &execution.UpstreamError{Message: "the response failed", Status: 500}
		if re := e.Get("response", "error"); present(re) {
			ue.Code, ue.Message = valueString(re.Get("code")), string(re.GetStringBytes("message"))
		}
		o.setErr(ue)
	case "error":
		if inner := e.Get("error"); present(inner) {
			o.setErr(ParseErrorObject(inner.MarshalTo(nil)))
			return
		}
		ue := &execution.UpstreamError{Message: string(e.GetStringBytes("message")), Code: valueString(e.Get("code")), Param: valueString(e.Get("param"))}
		ue.Status = StatusOf("", ue.Code)
		o.setErr(ue)
	}
}

func (o *Observer) ollama(data []byte) {
	l, ok := o.object(data)
	if !ok || l == nil {
		return
	}
	if e := l.Get("error"); present(e) {
		o.setErr(ParseErrorObject(e.MarshalTo(nil)))
		return
	}
	if tc := l.Get("message", "tool_calls"); present(tc) && !(tc.Type() == fastjson.TypeArray && len(tc.GetArray()) == 0) {
		o.ToolCall = true
	}
	o.Output.event(ollamaOutput(l))
	if u := ollamaUsage(int64Field(l, "prompt_eval_count"), int64Field(l, "eval_count")); u != nil {
		o.Usage = u
	}
	if l.GetBool("done") {
		o.Done, o.Ended = true, true
	}
}

// present reports whether v is a member that holds something (not
// missing, not null).
func present(v *fastjson.Value) bool { return v != nil && v.Type() != fastjson.TypeNull }

// int64Field is a numeric member of v, nil when absent or not a number.
func int64Field(v *fastjson.Value, keys ...string) *int64 {
	f := v.Get(keys...)
	if f == nil || f.Type() != fastjson.TypeNumber {
		return nil
	}
	n := f.GetInt64()
	return &n
}

// usageOf reads a usage object in Chat (prompt/completion) or Responses
// (input/output) naming, by the same rules as Usage.TokenUsage.
func usageOf(u *fastjson.Value) *execution.TokenUsage {
	w := Usage{PromptTokens: u.GetInt64("prompt_tokens"), CompletionTokens: u.GetInt64("completion_tokens"),
		InputTokens: u.GetInt64("input_tokens"), OutputTokens: u.GetInt64("output_tokens"), TotalTokens: u.GetInt64("total_tokens")}
	// Anthropic counts cached input apart from input_tokens.
	cacheRead := u.GetInt64("cache_read_input_tokens")
	w.InputTokens += cacheRead + u.GetInt64("cache_creation_input_tokens")
	if cacheRead > 0 {
		w.InputTokensDetails = &CachedDetails{cacheRead}
	}
	if d := u.Get("prompt_tokens_details"); present(d) {
		w.PromptTokensDetails = &CachedDetails{d.GetInt64("cached_tokens")}
	}
	if d := u.Get("input_tokens_details"); present(d) {
		w.InputTokensDetails = &CachedDetails{d.GetInt64("cached_tokens")}
	}
	if d := u.Get("completion_tokens_details"); present(d) {
		w.CompletionTokensDetails = &ReasoningDetails{d.GetInt64("reasoning_tokens")}
	}
	if d := u.Get("output_tokens_details"); present(d) {
		w.OutputTokensDetails = &ReasoningDetails{d.GetInt64("reasoning_tokens")}
	}
	return w.TokenUsage()
}

// valueString is a code or param as text: a string as is, a number in
// its shortest form; anything else is empty.
func valueString(v *fastjson.Value) string {
	if v == nil {
		return ""
	}
	switch v.Type() {
	case fastjson.TypeString:
		return string(v.GetStringBytes())
	case fastjson.TypeNumber:
		return codeString(v.GetFloat64())
	}
	return ""
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
