package surface

import (
	"time"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Encoder renders normalized events for one surface. A fresh encoder is
// made for every attempt: nothing of a failed, uncommitted attempt
// survives into its replay.
type Encoder interface {
	// Event returns the bytes ev produces for a streaming response (nil
	// for JSON responses, which accumulate).
	Event(ev execution.RunEvent) []byte
	// Body returns a JSON response's body after the complete event.
	Body(ev execution.RunEvent) []byte
	ContentType() string
	// TypedError returns the in-band terminal of a committed stream.
	TypedError(code, typ, msg string) []byte
}

// EncodeOptions are what an encoder renders with.
type EncodeOptions struct {
	Model        string // the model the answer names
	Stream       bool
	IncludeUsage bool
	Echo         openai.ResponseEcho
	Now          time.Time
	// Stops are the stop sequences the request asked for: the Messages
	// answer names the one an upstream reports ended it.
	Stops []string
}

func encodeChat(o EncodeOptions) Encoder {
	if o.Stream {
		return &chatSSE{s: openai.NewChatStream(openai.NewChatID(), o.Model, o.Now.Unix(), o.IncludeUsage)}
	}
	return &jsonEnc{a: openai.NewChatAccumulator(openai.NewChatID(), o.Model, o.Now.Unix())}
}

func encodeResponses(o EncodeOptions) Encoder {
	if o.Stream {
		return &responsesSSE{s: openai.NewResponsesStream(openai.NewResponseID(), o.Model, o.Now.Unix(), o.Echo)}
	}
	return &jsonEnc{a: openai.NewResponseAccumulator(openai.NewResponseID(), o.Model, o.Now.Unix(), o.Echo)}
}

func encodeOllama(generate bool) func(EncodeOptions) Encoder {
	return func(o EncodeOptions) Encoder {
		return &ollamaEnc{s: ollama.NewStream(o.Model, generate, o.Now), stream: o.Stream}
	}
}

func encodeMessages(o EncodeOptions) Encoder {
	if o.Stream {
		s := anthropic.NewStream(anthropic.NewMessageID(), o.Model)
		s.Stops = o.Stops
		return &messagesSSE{s: s}
	}
	a := anthropic.NewAccumulator(anthropic.NewMessageID(), o.Model)
	a.Stops = o.Stops
	return &jsonEnc{a: a}
}

type messagesSSE struct{ s *anthropic.Stream }

func (e *messagesSSE) Event(ev execution.RunEvent) []byte { return e.s.Append(nil, ev) }
func (e *messagesSSE) Body(execution.RunEvent) []byte     { return nil }
func (e *messagesSSE) ContentType() string                { return "text/event-stream; charset=utf-8" }
func (e *messagesSSE) TypedError(code, _ string, msg string) []byte {
	return anthropic.InBand(code, msg)
}

type chatSSE struct{ s *openai.ChatStream }

func (e *chatSSE) Event(ev execution.RunEvent) []byte { return e.s.Append(nil, ev) }
func (e *chatSSE) Body(execution.RunEvent) []byte     { return nil }
func (e *chatSSE) ContentType() string                { return "text/event-stream; charset=utf-8" }
func (e *chatSSE) TypedError(code, typ, msg string) []byte {
	return (&openai.Error{Type: typ, Code: code, Message: msg}).SSE()
}

type responsesSSE struct{ s *openai.ResponsesStream }

func (e *responsesSSE) Event(ev execution.RunEvent) []byte { return e.s.Append(nil, ev) }
func (e *responsesSSE) Body(execution.RunEvent) []byte     { return nil }
func (e *responsesSSE) ContentType() string                { return "text/event-stream; charset=utf-8" }
func (e *responsesSSE) TypedError(code, _ string, msg string) []byte {
	return e.s.AppendFailed(nil, code, msg)
}

// accumulator collects a run's events into one JSON answer (Chat,
// Responses, Messages).
type accumulator interface {
	Add(ev execution.RunEvent)
	Body() []byte
}

// jsonEnc renders a JSON answer: events accumulate, the body comes with
// the complete event; a JSON answer has no in-band terminal.
type jsonEnc struct{ a accumulator }

func (e *jsonEnc) Event(ev execution.RunEvent) []byte {
	e.a.Add(ev)
	return nil
}
func (e *jsonEnc) Body(ev execution.RunEvent) []byte        { e.a.Add(ev); return e.a.Body() }
func (e *jsonEnc) ContentType() string                      { return "application/json" }
func (e *jsonEnc) TypedError(string, string, string) []byte { return nil }

type ollamaEnc struct {
	s      *ollama.Stream
	stream bool
}

func (e *ollamaEnc) Event(ev execution.RunEvent) []byte {
	if !e.stream {
		e.s.Add(ev)
		return nil
	}
	return e.s.Append(nil, ev)
}
func (e *ollamaEnc) Body(ev execution.RunEvent) []byte { return e.s.Final(ev) }
func (e *ollamaEnc) ContentType() string {
	if e.stream {
		return "application/x-ndjson"
	}
	return "application/json; charset=utf-8"
}
func (e *ollamaEnc) TypedError(code, _ string, msg string) []byte {
	return (&ollama.Error{Message: code + ": " + msg}).Line()
}
