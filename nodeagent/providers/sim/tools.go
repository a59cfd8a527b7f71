package sim

import (
	"cmp"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// simTool is a tool the request offers: its name and argument schema.
type simTool struct {
	name   string
	schema json.RawMessage
}

// tools reads the request's tools in any of the shapes the surfaces send
// them: Chat's {"type":"function","function":{…,"parameters"}},
// Responses' flat {"type":"function","name",…,"parameters"}, and the
// Messages API's {"name",…,"input_schema"}.
func tools(raw json.RawMessage) []simTool {
	var list []struct {
		Name        string          `json:"name"`
		Parameters  json.RawMessage `json:"parameters"`
		InputSchema json.RawMessage `json:"input_schema"`
		Function    *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out []simTool
	for _, t := range list {
		switch {
		case t.Function != nil && t.Function.Name != "":
			out = append(out, simTool{t.Function.Name, t.Function.Parameters})
		case t.Name != "" && len(t.InputSchema) > 0:
			out = append(out, simTool{t.Name, t.InputSchema})
		case t.Name != "":
			out = append(out, simTool{t.Name, t.Parameters})
		}
	}
	return out
}

// chosenTool is the tool the sim calls: the one tool_choice names, else
// the first; none when there are no tools or tool_choice is none.
// namedTool is the tool a tool_choice names (Chat's function.name, the
// Responses API's and Anthropic's name), "" when it names none.
func namedTool(choice json.RawMessage) string {
	var named struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(choice, &named) != nil {
		return ""
	}
	return cmp.Or(named.Function.Name, named.Name)
}

// toolChoiceRefusal is the error of a tool_choice naming a tool the
// request does not define, or requiring a call with no tools to call,
// which OpenAI and Anthropic refuse: never answered with a call of
// another tool, or with none.
func toolChoiceRefusal(p execution.GenerationParams) *openai.Error {
	if required(p.ToolChoice) && len(tools(p.Tools)) == 0 {
		return openai.InvalidRequest("tool_choice", "tool_choice requires a tool call, and there are no tools: add tools, or leave tool_choice unset.")
	}
	want := namedTool(p.ToolChoice)
	if want == "" {
		return nil
	}
	for _, t := range tools(p.Tools) {
		if t.name == want {
			return nil
		}
	}
	return openai.InvalidRequest("tool_choice", "tool_choice names the tool %q, which is not in tools.", want[:min(len(want), 64)])
}

// required reports whether a tool_choice requires a call: Chat's and the
// Responses API's "required", Anthropic's {"type":"any"}, or a named tool.
func required(choice json.RawMessage) bool {
	var kind struct {
		Type string `json:"type"`
	}
	return strings.TrimSpace(string(choice)) == `"required"` || json.Unmarshal(choice, &kind) == nil && kind.Type == "any" || namedTool(choice) != ""
}

func chosenTool(p execution.GenerationParams) (simTool, bool) {
	list := tools(p.Tools)
	if len(list) == 0 {
		return simTool{}, false
	}
	choice := strings.TrimSpace(string(p.ToolChoice))
	if choice == `"none"` {
		return simTool{}, false
	}
	var named struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(p.ToolChoice, &named) == nil {
		if named.Type == "none" {
			return simTool{}, false
		}
		want := named.Function.Name
		if want == "" {
			want = named.Name
		}
		for _, t := range list {
			if t.name == want {
				return t, true
			}
		}
	}
	return list[0], true
}

// toolArguments are arguments conforming to the tool's schema; a tool
// without one gets {"input": words}.
func toolArguments(schema json.RawMessage, words string) json.RawMessage {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil || len(s) == 0 {
		b, _ := json.Marshal(map[string]string{"input": words})
		return b
	}
	return instance(schema, words)
}

// structuredAnswer is the answer a response format asks for: an instance
// of its JSON schema (Chat's json_schema.schema, Responses' schema,
// Ollama's format schema), or a JSON object holding the text for a bare
// JSON mode (json_object, Ollama's "json"); false for plain text.
func structuredAnswer(format json.RawMessage, text, words string) (string, bool) {
	raw := strings.TrimSpace(string(format))
	if raw == "" || raw == "null" {
		return "", false
	}
	if raw == `"json"` {
		return jsonObject(text), true
	}
	var f struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(format, &f) != nil {
		return "", false
	}
	switch {
	case f.Type == "json_schema" && f.JSONSchema != nil:
		return string(instance(f.JSONSchema.Schema, words)), true
	case f.Type == "json_schema":
		return string(instance(f.Schema, words)), true
	case f.Type == "json_object":
		return jsonObject(text), true
	case f.Type == "object" || len(f.Properties) > 0: // Ollama: the schema itself
		return string(instance(format, words)), true
	}
	return "", false
}

func jsonObject(text string) string {
	b, _ := json.Marshal(map[string]string{"answer": text})
	return string(b)
}

// chunks splits s into pieces of about n bytes, on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
