package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// Limits bound what a request may contain.
type Limits struct {
	MaxDepth    int // JSON nesting; default 64
	MaxMessages int // messages or input items; default 4096
	MaxStop     int // stop sequences; default 4 (OpenAI's limit)
	MaxTools    int // tools; default 128 (OpenAI's limit)
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = jsonstrict.DefaultMaxDepth
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = 4096
	}
	if l.MaxStop <= 0 {
		l.MaxStop = 4
	}
	if l.MaxTools <= 0 {
		l.MaxTools = 128
	}
	return l
}

// ChatRequest is a decoded, validated Chat Completions request.
type ChatRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	N            int64
	Messages     []execution.Message
	Params       execution.GenerationParams
	HasTools     bool
	// Neutral, when set, is why the provider-neutral form lost part of the
	// request (a content part it cannot carry, such as input_audio or
	// file). Providers that read only the neutral form must refuse the
	// request with it; OpenAI-compatible providers get the body itself.
	Neutral *Error
}

type chatWire struct {
	Model               *string         `json:"model"`
	Messages            []messageWire   `json:"messages"` // decoded with the body: one pass (nil: absent or null)
	Stream              *bool           `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	N                   *int64          `json:"n"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	User                *string         `json:"user"`
}

type streamOptions struct {
	IncludeUsage       *bool `json:"include_usage"`
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

type messageWire struct {
	Role       *string        `json:"role"`
	Content    jsonstrict.Raw `json:"content"` // shares the body: read once, into the message
	Name       *string        `json:"name"`
	ToolCallID *string        `json:"tool_call_id"`
	ToolCalls  []toolCallWire `json:"tool_calls"`
}

type toolCallWire struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// CheckBody runs the strict JSON checks every /v1 request body gets,
// mapping failures to 400 errors.
func CheckBody(body []byte, l Limits) *Error {
	l = l.withDefaults()
	if err := jsonstrict.Check(body, l.MaxDepth); err != nil {
		return InvalidRequest("", "We could not parse the JSON body of your request: %v.", err)
	}
	return nil
}

// DecodeChatRequest decodes and validates a Chat Completions body.
func DecodeChatRequest(body []byte, l Limits) (*ChatRequest, *Error) {
	return decodeChatRequest(body, l, true)
}

// CheckChatRequest is DecodeChatRequest for a body that keeps carrying
// the messages to whoever needs them (a run whose ChatBody it is: a node
// parses the messages from it): every message is checked as
// DecodeChatRequest checks it, and none is kept — the request's Messages
// are nil, so a long prompt is not copied out of the body.
func CheckChatRequest(body []byte, l Limits) (*ChatRequest, *Error) {
	return decodeChatRequest(body, l, false)
}

// decodeChatRequest is DecodeChatRequest, keeping the messages or not.
func decodeChatRequest(body []byte, l Limits, keep bool) (*ChatRequest, *Error) {
	l = l.withDefaults()
	w, err := jsonstrict.Decode[chatWire](body, l.MaxDepth)
	if err != nil {
		return nil, chatTypeError(err) // CheckBody's message for a refused body
	}
	req := &ChatRequest{N: 1}
	if w.Model == nil || *w.Model == "" {
		return nil, InvalidRequest("model", "you must provide a model parameter")
	}
	req.Model = *w.Model
	if w.Stream != nil {
		req.Stream = *w.Stream
	}
	if w.StreamOptions != nil {
		if !req.Stream {
			return nil, InvalidRequest("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		req.IncludeUsage = w.StreamOptions.IncludeUsage != nil && *w.StreamOptions.IncludeUsage
	}
	msgs, e := decodeMessages(w.Messages, l, &req.Neutral, keep)
	if e != nil {
		return nil, e
	}
	req.Messages = msgs
	if e := checkSampling(w.Temperature, w.TopP, w.PresencePenalty, w.FrequencyPenalty); e != nil {
		return nil, e
	}
	maxTok := w.MaxCompletionTokens
	param := "max_completion_tokens"
	if maxTok == nil {
		maxTok, param = w.MaxTokens, "max_tokens"
	}
	if maxTok != nil && *maxTok < 1 {
		return nil, InvalidRequest(param, "Invalid '%s': integer below minimum value. Expected a value >= 1.", param)
	}
	if w.N != nil {
		if *w.N < 1 || *w.N > 128 {
			return nil, InvalidRequest("n", "Invalid 'n': expected a value between 1 and 128.")
		}
		req.N = *w.N
	}
	stop, e := DecodeStop(w.Stop, l)
	if e != nil {
		return nil, e
	}
	tools, e := checkTools(w.Tools, l)
	if e != nil {
		return nil, e
	}
	req.HasTools = tools > 0
	req.Params = execution.GenerationParams{
		Temperature: w.Temperature, TopP: w.TopP, MaxTokens: maxTok, Seed: w.Seed, Stop: stop,
		Tools: nonNull(w.Tools), ToolChoice: nonNull(w.ToolChoice), ResponseFormat: nonNull(w.ResponseFormat),
	}
	return req, nil
}

// RunRequest returns the normalized execution request of r (identity and
// stall timeout are the caller's to fill).
func (r *ChatRequest) RunRequest() *execution.RunRequest {
	return &execution.RunRequest{Model: r.Model, Messages: r.Messages, Params: r.Params}
}

func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// typeError maps an encoding/json error to a 400 naming the field.
func typeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return InvalidRequest(field, "Invalid type for '%s': expected %s, but got %s.", field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return InvalidRequest("", "We could not parse the JSON body of your request: %v.", err)
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "a boolean"
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	case k == "struct", k == "map", k == "ptr":
		return "an object"
	}
	return k
}

func checkSampling(temp, topP, presence, frequency *float64) *Error {
	if temp != nil && (math.IsNaN(*temp) || *temp < 0 || *temp > 2) {
		return InvalidRequest("temperature", "Invalid 'temperature': expected a number between 0 and 2.")
	}
	if topP != nil && (math.IsNaN(*topP) || *topP < 0 || *topP > 1) {
		return InvalidRequest("top_p", "Invalid 'top_p': expected a number between 0 and 1.")
	}
	for _, p := range [...]struct {
		name string
		v    *float64
	}{{"presence_penalty", presence}, {"frequency_penalty", frequency}} {
		if p.v != nil && (*p.v < -2 || *p.v > 2) {
			return InvalidRequest(p.name, "Invalid '%s': expected a number between -2 and 2.", p.name)
		}
	}
	return nil
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// decodeMessages checks the decoded messages and maps them to the neutral
// form (or only checks them: keep false, nil returned).
func decodeMessages(ws []messageWire, l Limits, neutral **Error, keep bool) ([]execution.Message, *Error) {
	if ws == nil {
		return nil, InvalidRequest("messages", "Missing required parameter: 'messages'.")
	}
	if len(ws) == 0 {
		return nil, InvalidRequest("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.")
	}
	if len(ws) > l.MaxMessages {
		return nil, InvalidRequest("messages", "Invalid 'messages': array too long. Expected at most %d messages.", l.MaxMessages)
	}
	var out []execution.Message
	if keep {
		out = make([]execution.Message, 0, len(ws))
	}
	for i, w := range ws {
		m, e := decodeMessage(i, w, neutral, keep)
		if e != nil {
			return nil, e
		}
		if keep {
			out = append(out, m)
		}
	}
	return out, nil
}

// chatTypeError is typeError for a Chat body, whose messages are decoded
// with it: a type error inside them reads as the field within a message
// (param messages.<field>), and messages that are not an array of
// objects say so.
func chatTypeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return typeError(err)
	}
	switch {
	case te.Field == "messages":
		return InvalidRequest("messages", "Invalid type for 'messages': expected an array of message objects.")
	case strings.HasPrefix(te.Field, "messages."):
		inner := *te
		inner.Field = strings.TrimPrefix(te.Field, "messages.")
		e := typeError(&inner)
		e.Param = "messages." + e.Param
		return e
	}
	return typeError(err)
}

func decodeMessage(i int, w messageWire, neutral **Error, keep bool) (execution.Message, *Error) {
	param := func(f string) string { return "messages[" + itoa(i) + "]" + f }
	if w.Role == nil || !roles[*w.Role] {
		return execution.Message{}, InvalidRequest(param(".role"), "Invalid value for 'role': expected one of system, developer, user, assistant, tool.")
	}
	m := execution.Message{Role: *w.Role}
	if w.Name != nil {
		m.Name = *w.Name
	}
	if w.ToolCallID != nil {
		m.ToolCallID = *w.ToolCallID
	}
	if m.Role == "tool" && m.ToolCallID == "" {
		return m, InvalidRequest(param(".tool_call_id"), "Missing required parameter: 'tool_call_id' for a message with role 'tool'.")
	}
	for _, tc := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, execution.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if e := decodeContent(json.RawMessage(w.Content), &m, param(".content"), neutral, keep); e != nil {
		return m, e
	}
	return m, nil
}

// decodeContent checks a message's content and, with keep, sets it on m
// (a plain string, the common long prompt, is then copied out of the
// body).
func decodeContent(raw json.RawMessage, m *execution.Message, param string, neutral **Error, keep bool) *Error {
	raw = nonNull(raw)
	if len(raw) == 0 {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return nil
		}
		if m.Role == "assistant" {
			return nil
		}
		return InvalidRequest(param, "Missing required parameter: '%s'.", param)
	}
	switch {
	case raw[0] == '"' && !keep:
		return nil // a string literal of a checked body: nothing to check, nothing kept
	case raw[0] == '"' && isPlainString(raw):
		m.Content = string(raw[1 : len(raw)-1])
		return nil
	case raw[0] == '"':
		return jsonError(json.Unmarshal(raw, &m.Content), param)
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return InvalidRequest(param, "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	var text strings.Builder
	for j, p := range parts {
		switch p.Type {
		case "text", "input_text":
			text.WriteString(p.Text)
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return InvalidRequest(param+"["+itoa(j)+"].image_url", "Missing required parameter: 'image_url.url'.")
			}
			m.Images = append(m.Images, p.ImageURL.URL)
		case "":
			return InvalidRequest(param+"["+itoa(j)+"].type", "Missing required parameter: '%s[%d].type'.", param, j)
		default:
			// input_audio, file, refusal and parts iop does not know pass
			// unchanged to OpenAI-compatible providers; the neutral form
			// cannot carry them.
			note(neutral, refuse(param+"["+itoa(j)+"].type", "is a content part ("+clip(p.Type, 64)+") this model's provider cannot take"))
		}
	}
	m.Content = text.String()
	return nil
}

// isPlainString reports whether raw is a JSON string literal without
// escapes, whose value is its bytes between the quotes, read without a
// decoding pass: a body CheckBody passed is valid UTF-8 and valid JSON,
// so such a literal holds no control character and means exactly its
// bytes. Long prompts are mostly such strings.
func isPlainString(raw json.RawMessage) bool {
	n := len(raw)
	return n >= 2 && raw[0] == '"' && raw[n-1] == '"' && bytes.IndexByte(raw[1:n-1], '\\') < 0 && bytes.IndexByte(raw[1:n-1], '"') < 0
}

func jsonError(err error, param string) *Error {
	if err == nil {
		return nil
	}
	return InvalidRequest(param, "Invalid value for '%s'.", param)
}

// DecodeStop reads a request's stop member: a string or an array of at
// most l.MaxStop strings (nil when absent or null).
func DecodeStop(raw json.RawMessage, l Limits) ([]string, *Error) {
	l = l.withDefaults()
	raw = nonNull(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, InvalidRequest("stop", "Invalid 'stop'.")
		}
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, InvalidRequest("stop", "Invalid type for 'stop': expected a string or an array of strings.")
	}
	if len(ss) > l.MaxStop {
		return nil, InvalidRequest("stop", "Invalid 'stop': array too long. Expected at most %d sequences.", l.MaxStop)
	}
	return ss, nil
}

// checkTools validates the tools array shape and returns its length.
func checkTools(raw json.RawMessage, l Limits) (int, *Error) {
	raw = nonNull(raw)
	if len(raw) == 0 {
		return 0, nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return 0, InvalidRequest("tools", "Invalid type for 'tools': expected an array of tool objects.")
	}
	if len(tools) > l.MaxTools {
		return 0, InvalidRequest("tools", "Invalid 'tools': array too long. Expected at most %d tools.", l.MaxTools)
	}
	for i, t := range tools {
		if t.Type == "function" && (t.Function == nil || t.Function.Name == "") {
			return 0, InvalidRequest("tools["+itoa(i)+"].function.name", "Missing required parameter: 'tools[%d].function.name'.", i)
		}
	}
	return len(tools), nil
}

func itoa(i int) string { return strconv.Itoa(i) }

// relayLimits bound a body the edge already validated under its own
// limits (which an operator may have raised): only a hostile peer exceeds
// them.
var relayLimits = Limits{MaxDepth: 1024, MaxMessages: 1 << 20, MaxStop: 1 << 10, MaxTools: 1 << 14}

// NeutralRun is the neutral messages and parameters of a Chat body the
// edge already validated — the client's own or its lossless translation
// of another surface — for a provider that needs them (the node parses
// the one form of the request the link carries). It checks the shape,
// not the client-facing rules (sampling ranges, OpenAI's stop and tool
// counts), which the edge applied to the surface the client used.
func NeutralRun(body []byte) (*execution.RunRequest, *Error) {
	w, err := jsonstrict.Decode[chatWire](body, relayLimits.MaxDepth)
	if err != nil {
		if jsonstrict.IsCheckError(err) {
			return nil, InvalidRequest("", "The chat body is not valid JSON: %v.", err)
		}
		return nil, chatTypeError(err)
	}
	var neutral *Error
	msgs, e := decodeMessages(w.Messages, relayLimits, &neutral, true)
	if e != nil {
		return nil, e
	}
	stop, e := DecodeStop(w.Stop, relayLimits)
	if e != nil {
		return nil, e
	}
	maxTok := w.MaxCompletionTokens
	if maxTok == nil {
		maxTok = w.MaxTokens
	}
	r := &execution.RunRequest{Messages: msgs, Params: execution.GenerationParams{
		Temperature: w.Temperature, TopP: w.TopP, MaxTokens: maxTok, Seed: w.Seed, Stop: stop,
		Tools: nonNull(w.Tools), ToolChoice: nonNull(w.ToolChoice), ResponseFormat: nonNull(w.ResponseFormat),
	}}
	if w.Model != nil {
		r.Model = *w.Model
	}
	return r, nil
}
