package openai

import (
	"encoding/json"
	"strings"

	"github.com/iopgw/iop/codec/jsonstrict"
	"github.com/iopgw/iop/execution"
)

// ResponsesRequest is a decoded, validated Responses API request.
type ResponsesRequest struct {
	Model              string
	Stream             bool
	Instructions       string
	Messages           []execution.Message
	Params             execution.GenerationParams
	PreviousResponseID string
	Store              *bool
	Metadata           json.RawMessage
	ToolChoice         json.RawMessage
	Tools              json.RawMessage // as sent, for echoing in the Response
	ParallelToolCalls  *bool
	// ServerTools is true when the request asks for tools the server would
	// execute (web_search, file_search, code_interpreter, mcp, ...): side
	// effects outside the client's control.
	ServerTools bool
	HasTools    bool
	// Neutral, when set, is why the provider-neutral form (Messages,
	// Params) lost part of the request: an input item or content part it
	// cannot carry. Providers that read only the neutral form must refuse
	// the request with it; the tunnel and the Chat translation carry it.
	Neutral *Error
}

type responsesWire struct {
	Model           *string         `json:"model"`
	Input           json.RawMessage `json:"input"`
	Instructions    *string         `json:"instructions"`
	Stream          *bool           `json:"stream"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	MaxOutputTokens *int64          `json:"max_output_tokens"`
	Tools           json.RawMessage `json:"tools"`
	ToolChoice      json.RawMessage `json:"tool_choice"`
	Text            *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              *bool           `json:"store"`
	Metadata           json.RawMessage `json:"metadata"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Background         *bool           `json:"background"`
}

type inputItemWire struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// DecodeResponsesRequest decodes and validates a Responses API body.
func DecodeResponsesRequest(body []byte, l Limits) (*ResponsesRequest, *Error) {
	return decodeResponses(body, l, false)
}

// DecodeInputTokensRequest decodes and validates the body of a Responses
// token count (POST /v1/responses/input_tokens): a Responses request
// whose input may be absent (instructions or tools alone are counted).
func DecodeInputTokensRequest(body []byte, l Limits) (*ResponsesRequest, *Error) {
	return decodeResponses(body, l, true)
}

func decodeResponses(body []byte, l Limits, count bool) (*ResponsesRequest, *Error) {
	l = l.withDefaults()
	w, err := jsonstrict.Decode[responsesWire](body, l.MaxDepth)
	if err != nil {
		return nil, typeError(err) // CheckBody's message for a refused body
	}
	if w.Model == nil || *w.Model == "" {
		return nil, InvalidRequest("model", "Missing required parameter: 'model'.")
	}
	r := &ResponsesRequest{Model: *w.Model, Store: w.Store, Metadata: nonNull(w.Metadata), ToolChoice: nonNull(w.ToolChoice),
		Tools: nonNull(w.Tools), ParallelToolCalls: w.ParallelToolCalls}
	if w.Stream != nil {
		r.Stream = *w.Stream
	}
	if w.Background != nil && *w.Background {
		return nil, InvalidRequest("background", "Background responses are not supported by this gateway.")
	}
	if w.PreviousResponseID != nil {
		r.PreviousResponseID = *w.PreviousResponseID
	}
	if w.Instructions != nil {
		r.Instructions = *w.Instructions
		r.Messages = append(r.Messages, execution.Message{Role: "system", Content: *w.Instructions})
	}
	if !count || len(nonNull(w.Input)) > 0 {
		msgs, e := decodeInput(w.Input, l, &r.Neutral)
		if e != nil {
			return nil, e
		}
		r.Messages = append(r.Messages, msgs...)
	}
	if e := checkSampling(w.Temperature, w.TopP, nil, nil); e != nil {
		return nil, e
	}
	if w.MaxOutputTokens != nil && *w.MaxOutputTokens < 1 {
		return nil, InvalidRequest("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 1.")
	}
	chatTools, server, e := convertTools(w.Tools, l)
	if e != nil {
		return nil, e
	}
	r.ServerTools = server
	r.HasTools = len(chatTools) > 0 || server
	r.Params = execution.GenerationParams{Temperature: w.Temperature, TopP: w.TopP, MaxTokens: w.MaxOutputTokens, Tools: chatTools,
		ToolChoice: convertToolChoice(r.ToolChoice)}
	if w.Text != nil {
		r.Params.ResponseFormat = nonNull(w.Text.Format)
	}
	return r, nil
}

// RunRequest returns the normalized execution request of r.
func (r *ResponsesRequest) RunRequest() *execution.RunRequest {
	return &execution.RunRequest{Model: r.Model, Messages: r.Messages, Params: r.Params}
}

func decodeInput(raw json.RawMessage, l Limits, neutral **Error) ([]execution.Message, *Error) {
	raw = nonNull(raw)
	if len(raw) == 0 {
		return nil, InvalidRequest("input", "Missing required parameter: 'input'.")
	}
	if raw[0] == '"' {
		var s string
		if err := jsonstrict.UnmarshalChecked(raw, &s); err != nil {
			return nil, InvalidRequest("input", "Invalid 'input'.")
		}
		return []execution.Message{{Role: "user", Content: s}}, nil
	}
	var items []inputItemWire // raw is part of the body DecodeResponsesRequest checked
	if err := jsonstrict.UnmarshalChecked(raw, &items); err != nil {
		return nil, InvalidRequest("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	if len(items) == 0 {
		return nil, InvalidRequest("input", "Invalid 'input': empty array.")
	}
	if len(items) > l.MaxMessages {
		return nil, InvalidRequest("input", "Invalid 'input': array too long. Expected at most %d items.", l.MaxMessages)
	}
	var out []execution.Message
	for i, it := range items {
		m, e := inputItem(i, it, neutral)
		if e != nil {
			return nil, e
		}
		if m.Role != "" {
			out = append(out, m)
		}
	}
	return out, nil
}

// note keeps the first reason the neutral form is incomplete.
func note(neutral **Error, e *Error) {
	if *neutral == nil {
		*neutral = e
	}
}

// inputItem decodes one input item; an item of a type the neutral form
// cannot carry is noted and skipped (zero Message).
func inputItem(i int, it inputItemWire, neutral **Error) (execution.Message, *Error) {
	param := "input[" + itoa(i) + "]"
	switch it.Type {
	case "function_call":
		return execution.Message{Role: "assistant", ToolCalls: []execution.ToolCall{{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}}}, nil
	case "function_call_output":
		var out string
		if len(it.Output) > 0 && it.Output[0] == '"' {
			_ = jsonstrict.UnmarshalChecked(it.Output, &out)
		} else {
			out = string(it.Output)
		}
		return execution.Message{Role: "tool", ToolCallID: it.CallID, Content: out}, nil
	case "", "message":
	case "reasoning":
		// An earlier turn's reasoning, passed back: no model takes it
		// as input but the one that made it, and the Chat translation
		// leaves it out too.
		return execution.Message{}, nil
	default:
		note(neutral, refuse(param+".type", "is an input item ("+clip(it.Type, 64)+") this model's provider cannot take"))
		return execution.Message{}, nil
	}
	if !roles[it.Role] {
		return execution.Message{}, InvalidRequest(param+".role", "Invalid value for 'role'.")
	}
	m := execution.Message{Role: it.Role}
	raw := nonNull(it.Content)
	if len(raw) == 0 {
		return m, InvalidRequest(param+".content", "Missing required parameter: '%s.content'.", param)
	}
	if raw[0] == '"' {
		_ = jsonstrict.UnmarshalChecked(raw, &m.Content)
		return m, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
	}
	if err := jsonstrict.UnmarshalChecked(raw, &parts); err != nil {
		return m, InvalidRequest(param+".content", "Invalid type for '%s.content'.", param)
	}
	var text strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			text.WriteString(p.Text)
		case "input_image":
			if p.ImageURL != "" {
				m.Images = append(m.Images, p.ImageURL)
			} else {
				note(neutral, refuse(param+".content", "has an image by file id that this model's provider cannot resolve"))
			}
		default:
			note(neutral, refuse(param+".content", "has a content part ("+clip(p.Type, 64)+") this model's provider cannot take"))
		}
	}
	m.Content = text.String()
	return m, nil
}

// convertTools turns Responses function tools into Chat-style tools JSON
// for providers, and reports whether server-executed tools were asked for.
func convertTools(raw json.RawMessage, l Limits) (json.RawMessage, bool, *Error) {
	raw = nonNull(raw)
	if len(raw) == 0 {
		return nil, false, nil
	}
	var tools []responsesTool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, false, InvalidRequest("tools", "Invalid type for 'tools': expected an array of tool objects.")
	}
	if len(tools) > l.MaxTools {
		return nil, false, InvalidRequest("tools", "Invalid 'tools': array too long. Expected at most %d tools.", l.MaxTools)
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	}
	type chatTool struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	var out []chatTool
	server := false
	for i, t := range tools {
		if t.Type != "function" {
			server = true
			continue
		}
		if t.Name == "" {
			return nil, false, InvalidRequest("tools["+itoa(i)+"].name", "Missing required parameter: 'tools[%d].name'.", i)
		}
		out = append(out, chatTool{Type: "function", Function: fn{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
	}
	if len(out) == 0 {
		return nil, server, nil
	}
	b, _ := json.Marshal(out)
	return b, server, nil
}

// convertToolChoice maps a Responses tool_choice to the Chat shape.
func convertToolChoice(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || raw[0] == '"' {
		return raw
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &tc) != nil || tc.Type != "function" {
		return raw
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
	return b
}
