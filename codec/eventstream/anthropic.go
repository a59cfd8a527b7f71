package eventstream

import (
	"github.com/valyala/fastjson"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/execution"
)

// msgsUsage is a Messages stream's usage as it builds up: message_start
// reports the input (and output so far), message_delta the output (and,
// from newer servers, the input again).
type msgsUsage struct {
	in, out *execution.TokenUsage
}

// typed is a typed event's JSON object and its type: the object's
// "type", else the SSE event name; nil when the data is no object.
func (o *Observer) typed(ev Event) (*fastjson.Value, string) {
	e, ok := o.object(ev.Data)
	if !ok || e == nil {
		return nil, ""
	}
	typ := string(e.GetStringBytes("type"))
	if typ == "" {
		typ = ev.Name
	}
	return e, typ
}

// anthropic observes one Messages event.
func (o *Observer) anthropic(ev Event) {
	e, typ := o.typed(ev)
	if e == nil {
		return
	}
	switch typ {
	case "message_start":
		if u := e.Get("message", "usage"); present(u) {
			o.msgs.in = usageOf(u)
			o.Usage = o.msgs.merged()
		}
	case "content_block_start":
		b := e.Get("content_block")
		if t := string(b.GetStringBytes("type")); t == "tool_use" || t == "server_tool_use" {
			o.ToolCall = true
		}
		o.Output.event(len(b.GetStringBytes("name")) + len(b.GetStringBytes("text")))
	case "content_block_delta":
		d := e.Get("delta")
		o.Output.event(len(d.GetStringBytes("text")) + len(d.GetStringBytes("partial_json")) + len(d.GetStringBytes("thinking")))
	case "message_delta":
		if u := e.Get("usage"); present(u) {
			o.msgs.out = usageOf(u)
			o.Usage = o.msgs.merged()
		}
	case "message_stop":
		o.Done, o.Ended = true, true
	case "error":
		inner := e.Get("error")
		t := string(inner.GetStringBytes("type"))
		o.setErr(&execution.UpstreamError{Status: anthropic.StatusForType(t), Type: t, Message: string(inner.GetStringBytes("message"))})
	}
}

// merged is the stream's usage: the input from message_start unless
// message_delta restated it, the output from message_delta once it came.
func (m msgsUsage) merged() *execution.TokenUsage {
	u := &execution.TokenUsage{}
	if m.in != nil {
		*u = *m.in
	}
	if m.out != nil {
		if m.out.PromptTokens > 0 {
			u.PromptTokens, u.CachedTokens = m.out.PromptTokens, m.out.CachedTokens
		}
		u.CompletionTokens = m.out.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// messagesBodyOutput is the output bytes of a whole Messages answer.
func messagesBodyOutput(v *fastjson.Value) int {
	n := 0
	for _, b := range v.GetArray("content") {
		n += len(b.GetStringBytes("text")) + len(b.GetStringBytes("thinking")) + len(b.GetStringBytes("name"))
		if in := b.Get("input"); present(in) {
			n += len(in.MarshalTo(nil))
		}
	}
	return n
}
