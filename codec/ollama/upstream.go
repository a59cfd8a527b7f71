package ollama

import "encoding/json"

// ChatRequest is the native /api/chat body iop sends an Ollama upstream.
type ChatRequest struct {
	Model    string                     `json:"model"`
	Messages []Message                  `json:"messages"`
	Stream   bool                       `json:"stream"`
	Think    json.RawMessage            `json:"think,omitempty"`
	Options  map[string]json.RawMessage `json:"options,omitempty"`
	Tools    json.RawMessage            `json:"tools,omitempty"`
	Format   json.RawMessage            `json:"format,omitempty"`
}

// Message is one native chat message, as clients send it and as iop
// sends it upstream.
type Message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Images    []string   `json:"images,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	ToolName  string     `json:"tool_name,omitempty"`
}

// ToolCall is a native tool call: Ollama's arguments are a JSON object.
type ToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}
