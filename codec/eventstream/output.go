package eventstream

import (
	"github.com/valyala/fastjson"
)

// Output is how much generated output a stream or body carried: the
// bytes of its text (content, reasoning, refusals, tool-call names and
// arguments, as decoded from the JSON strings) and the number of events
// that carried some. The gateway estimates the usage of an answer whose
// upstream reported none from it.
type Output struct {
	Bytes  int64
	Events int64
}

// Add adds o2 to o.
func (o *Output) Add(o2 Output) {
	o.Bytes += o2.Bytes
	o.Events += o2.Events
}

// event counts one event that carried n bytes of output.
func (o *Output) event(n int) {
	if n > 0 {
		o.Bytes += int64(n)
		o.Events++
	}
}

// chatOutput is the output bytes of one Chat (or legacy Completions)
// chunk, or of a whole answer's choices when whole (message, not delta).
func chatOutput(c *fastjson.Value, whole bool) int {
	n := 0
	for _, ch := range c.GetArray("choices") {
		n += readChatChoice(ch, whole).output
	}
	return n
}

// chatChoice is what the observer reads of one choice.
type chatChoice struct {
	index    int
	finished bool // a non-empty finish_reason
	toolCall bool // the delta or message carries tool_calls or function_call
	output   int  // generated output bytes, as decoded from the JSON strings
}

// readChatChoice reads one choice in a single pass over its members and
// its delta's (message's, when whole): one visit instead of a lookup,
// each scanning every key, per field. As with a lookup, the first of
// duplicated members counts.
func readChatChoice(ch *fastjson.Value, whole bool) (c chatChoice) {
	obj, err := ch.Object()
	if err != nil {
		return c
	}
	part := "delta"
	if whole {
		part = "message"
	}
	var seen members
	obj.Visit(func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "index":
			if seen.first(0) {
				c.index = v.GetInt()
			}
		case "finish_reason":
			if seen.first(1) {
				c.finished = len(v.GetStringBytes()) > 0
			}
		case "text": // legacy completions
			if seen.first(2) {
				c.output += len(v.GetStringBytes())
			}
		case part:
			if seen.first(3) {
				readChatMessage(v, &c)
			}
		}
	})
	return c
}

// readChatMessage adds a delta's or message's output and tool calls to c.
func readChatMessage(m *fastjson.Value, c *chatChoice) {
	obj, err := m.Object()
	if err != nil {
		return
	}
	var seen members
	obj.Visit(func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "content", "reasoning_content", "reasoning", "refusal":
			if seen.first(textMember(k)) {
				c.output += len(v.GetStringBytes())
			}
		case "tool_calls":
			if seen.first(4) {
				c.toolCall = c.toolCall || present(v)
				for _, tc := range v.GetArray() {
					c.output += len(tc.GetStringBytes("function", "name")) + len(tc.GetStringBytes("function", "arguments"))
				}
			}
		case "function_call":
			if seen.first(5) {
				c.toolCall = c.toolCall || present(v)
				c.output += len(v.GetStringBytes("name")) + len(v.GetStringBytes("arguments"))
			}
		}
	})
}

// textMember numbers a message's text members for members.first.
func textMember(k []byte) int {
	switch string(k) {
	case "content":
		return 0
	case "reasoning_content":
		return 1
	case "reasoning":
		return 2
	}
	return 3 // refusal
}

// members remembers which of an object's members (by number) were seen.
type members uint8

// first reports whether member i is seen for the first time.
func (m *members) first(i int) bool {
	if *m&(1<<i) != 0 {
		return false
	}
	*m |= 1 << i
	return true
}

// responsesOutput is the output bytes of one Responses stream event.
func responsesOutput(typ string, e *fastjson.Value) int {
	switch typ {
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
		"response.reasoning_summary_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		return len(e.GetStringBytes("delta"))
	}
	return 0
}

// ollamaOutput is the output bytes of one Ollama line or whole answer.
func ollamaOutput(l *fastjson.Value) int {
	n := len(l.GetStringBytes("response")) + len(l.GetStringBytes("thinking")) // generate
	if m := l.Get("message"); m != nil {
		n += len(m.GetStringBytes("content")) + len(m.GetStringBytes("thinking"))
		for _, tc := range m.GetArray("tool_calls") {
			n += len(tc.GetStringBytes("function", "name"))
			if a := tc.Get("function", "arguments"); present(a) {
				n += len(a.MarshalTo(nil))
			}
		}
	}
	return n
}

// responsesBodyOutput is the output bytes of a whole Responses object.
func responsesBodyOutput(v *fastjson.Value) int {
	n := 0
	for _, it := range v.GetArray("output") {
		n += len(it.GetStringBytes("arguments")) + len(it.GetStringBytes("name")) + len(it.GetStringBytes("input"))
		for _, c := range it.GetArray("content") {
			n += len(c.GetStringBytes("text")) + len(c.GetStringBytes("refusal"))
		}
		for _, s := range it.GetArray("summary") {
			n += len(s.GetStringBytes("text"))
		}
	}
	return n
}

// BodyOutput is the generated output of a whole (non-streaming) JSON
// answer: Chat or Completions choices, a Responses object's output, or an
// Ollama answer. Zero for anything else (an embedding has none).
func BodyOutput(body []byte) (o Output) {
	ParseWhole(body, func(v *fastjson.Value, err error) {
		if err == nil && v.Type() == fastjson.TypeObject {
			o = valueOutput(v)
		}
	})
	return o
}

// valueOutput is BodyOutput of a parsed object.
func valueOutput(v *fastjson.Value) (o Output) {
	switch {
	case v.Get("choices") != nil:
		o.event(chatOutput(v, true))
	case v.Get("output") != nil:
		o.event(responsesBodyOutput(v))
	case string(v.GetStringBytes("type")) == "message":
		o.event(messagesBodyOutput(v))
	default:
		o.event(ollamaOutput(v))
	}
	o.Events = 0 // a whole answer says nothing about how many tokens it took
	return o
}
