package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/iopgw/iop/execution"
)

// Request is what iop reads of a Messages request: its head (model,
// stream, the output limit) and its neutral form.
type Request struct {
	Model     string
	Stream    bool
	MaxTokens int64
	// Run is the request's neutral messages and parameters (the sim
	// answers from them).
	Run *execution.RunRequest
	// Prefill: the last message is the assistant's text, which the answer
	// continues (the API's prefill) instead of answering it.
	Prefill bool
	// Lost names the first content block Run cannot carry (a document, an
	// image by file id, a server tool's result), as "messages.1.content.0:
	// a document block"; empty when Run is the whole request. A provider
	// that answers from Run refuses a request that lost something.
	Lost string
}

type requestWire struct {
	Model         *string           `json:"model"`
	MaxTokens     *int64            `json:"max_tokens"`
	Stream        *bool             `json:"stream"`
	System        json.RawMessage   `json:"system"`
	Messages      []messageWire     `json:"messages"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	StopSequences []string          `json:"stop_sequences"`
	Tools         json.RawMessage   `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	Metadata      map[string]string `json:"metadata"`
}

type messageWire struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type blockWire struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// Decode reads a Messages request: model, max_tokens and messages are
// required (as the API requires them); count_tokens requests, which have
// no max_tokens, are read with DecodeCount.
func Decode(body []byte) (*Request, *Error) { return decode(body, true) }

// DecodeCount reads a /v1/messages/count_tokens request.
func DecodeCount(body []byte) (*Request, *Error) { return decode(body, false) }

func decode(body []byte, needMax bool) (*Request, *Error) {
	var w requestWire
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&w); err != nil {
		return nil, New(http.StatusBadRequest, fmt.Sprintf("The request body is not a valid Messages request: %v.", err))
	}
	switch {
	case w.Model == nil || *w.Model == "":
		return nil, New(http.StatusBadRequest, "model: Field required")
	case needMax && w.MaxTokens == nil:
		return nil, New(http.StatusBadRequest, "max_tokens: Field required")
	case needMax && *w.MaxTokens < 0: // 0 warms the prompt cache without an answer
		return nil, New(http.StatusBadRequest, "max_tokens: Input should be greater than or equal to 0")
	case len(w.Messages) == 0:
		return nil, New(http.StatusBadRequest, "messages: Field required")
	}
	r := &Request{Model: *w.Model, Stream: w.Stream != nil && *w.Stream}
	run := &execution.RunRequest{Model: r.Model, Params: execution.GenerationParams{Temperature: w.Temperature, TopP: w.TopP, Stop: w.StopSequences,
		Tools: nonNull(w.Tools), ToolChoice: nonNull(w.ToolChoice)}}
	if w.MaxTokens != nil {
		r.MaxTokens = *w.MaxTokens
		run.Params.MaxTokens = w.MaxTokens
	}
	if sys, e := text(w.System, "system"); e != nil {
		return nil, e
	} else if sys != "" {
		run.Messages = append(run.Messages, execution.Message{Role: "system", Content: sys})
	}
	for i, m := range w.Messages {
		msgs, lost, e := neutral(m, i)
		if e != nil {
			return nil, e
		}
		run.Messages = append(run.Messages, msgs...)
		r.Lost = cmp.Or(r.Lost, lost)
	}
	r.Run = run
	if n := len(run.Messages); n > 0 && run.Messages[n-1].Role == "assistant" && len(run.Messages[n-1].ToolCalls) == 0 {
		r.Prefill = true
	}
	return r, nil
}

// text is a string, or the text of an array of text blocks.
func text(raw json.RawMessage, field string) (string, *Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	}
	var blocks []blockWire
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", New(http.StatusBadRequest, field+": Input should be a valid string or a list of content blocks")
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String(), nil
}

// neutral maps one Messages message: text and images, an assistant's
// tool_use blocks as tool calls, a user's tool_result blocks as tool
// messages. Thinking blocks of earlier turns are left out, as the API
// leaves them out of the model's context; lost names the first other
// block the neutral form cannot carry.
func neutral(m messageWire, i int) (out []execution.Message, lost string, e *Error) {
	field := fmt.Sprintf("messages.%d", i)
	if m.Role != "user" && m.Role != "assistant" {
		return nil, "", New(http.StatusBadRequest, field+".role: Input should be 'user' or 'assistant'")
	}
	raw := bytes.TrimSpace(m.Content)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []execution.Message{{Role: m.Role, Content: s}}, "", nil
	}
	var blocks []blockWire
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, "", New(http.StatusBadRequest, field+".content: Input should be a valid string or a list of content blocks")
	}
	out = []execution.Message{{Role: m.Role}}
	for j, bl := range blocks {
		switch {
		case bl.Type == "text":
			out[0].Content += bl.Text
		case bl.Type == "image" && bl.Source != nil && bl.Source.Type == "base64":
			out[0].Images = append(out[0].Images, "data:"+bl.Source.MediaType+";base64,"+bl.Source.Data)
		case bl.Type == "image" && bl.Source != nil && bl.Source.URL != "":
			out[0].Images = append(out[0].Images, bl.Source.URL)
		case bl.Type == "tool_use":
			out[0].ToolCalls = append(out[0].ToolCalls, execution.ToolCall{ID: bl.ID, Name: bl.Name, Arguments: string(bl.Input)})
		case bl.Type == "tool_result":
			s, _ := text(bl.Content, field+".content")
			out = append(out, execution.Message{Role: "tool", ToolCallID: bl.ToolUseID, Content: s})
		case bl.Type == "thinking" || bl.Type == "redacted_thinking":
		case lost == "" && bl.Type == "image":
			lost = fmt.Sprintf("%s.content.%d: an image by file id", field, j)
		case lost == "":
			lost = fmt.Sprintf("%s.content.%d: a %s block", field, j, strings.ToValidUTF8(bl.Type[:min(len(bl.Type), 64)], ""))
		}
	}
	return out, lost, nil
}

// nonNull is raw, or nil for an absent or null value.
func nonNull(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return nil
	}
	return raw
}
