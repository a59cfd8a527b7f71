package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/iopgw/iop/codec/eventstream"
	oaicodec "github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/nodeagent/providers/httpx"
)

// maxEventSize bounds one upstream SSE event (lines above 64 KiB are
// normal for tool arguments; 16 MiB is generous).
const maxEventSize = 16 << 20

// Execute implements [execution.Provider]: the client's Chat Completions
// body, unchanged but for the model and the streaming fields, sent
// upstream; the answer's chunks turned into events in order. A client's
// non-stream request goes upstream as a stream unless the provider is
// configured for JSON (NonStream), so the watchdog sees every token.
func (p *Provider) Execute(ctx context.Context, req *execution.RunRequest, emit *execution.Emitter) error {
	stream := req.Stream || p.cfg.NonStream != NonStreamJSON
	body, err := upstreamBody(req, stream, p.cfg.PrefillFields)
	if err != nil {
		return execution.NewFailure(execution.FailureCodeInvalidRequest, err.Error())
	}
	accept := "text/event-stream"
	if !stream {
		accept = "application/json"
	}
	read := func(resp *http.Response) error { return p.readAnswer(ctx, resp, emit) }
	return httpx.Run(ctx, p.cfg.Client, p.base+"/chat/completions", accept, req.Header, body, p.cfg.Credentials, req.Model, emit, read)
}

// readAnswer reads the upstream's answer as what it is, whatever was
// asked: an event stream (text/event-stream) event by event; anything
// else whole — a chat completion (a provider configured for JSON, or a
// server that does not stream and answers whole), the error it reports
// instead, else the events it holds (a stream labelled otherwise).
func (p *Provider) readAnswer(ctx context.Context, resp *http.Response, emit *execution.Emitter) error {
	if f, stream := eventstream.FormatFor(resp.Header.Get("Content-Type")); stream && f == eventstream.FormatSSE {
		return p.readStream(ctx, resp.Body, emit)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	switch {
	case err != nil:
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "reading upstream answer: " + err.Error()})
	case len(b) > maxJSONAnswer:
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "the upstream answer is larger than 64 MiB"})
	}
	if evs, _, ok := oaicodec.CompletionEvents(b); ok {
		emitCompletion(evs, emit)
		return nil
	}
	a := eventstream.ReadAnswer(b)
	switch {
	case a.Err != nil:
		return execution.UpstreamFailure(a.Err)
	case a.Whole:
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "the upstream answer is not a chat completion"})
	}
	return p.readStream(ctx, bytes.NewReader(b), emit)
}

// readStream turns upstream SSE chunks into events until [DONE]. A stream
// that ends cleanly after a finish_reason without [DONE] is complete; one
// that ends before any finish_reason, or with a read error, is an error.
// An event that is not the JSON expected is skipped and counted, as the
// official clients skip it; an error event is the upstream's error.
func (p *Provider) readStream(ctx context.Context, body io.Reader, emit *execution.Emitter) error {
	st := &streamState{p: p}
	var ferr error
	err := eventstream.Scan(body, eventstream.FormatSSE, maxEventSize, func(ev eventstream.Event) bool {
		var done bool
		done, ferr = st.handle(ev, emit)
		return !done && ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "reading upstream stream: " + err.Error()})
	}
	if !st.finished {
		return execution.UpstreamFailure(&execution.UpstreamError{Status: http.StatusOK, Message: "upstream stream ended without a finish_reason or [DONE]"})
	}
	st.flush(emit)
	done := execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: st.finish, Usage: st.usage}
	if st.finish == "stop" {
		done.StopSequence = st.stop
	}
	emit.Emit(done)
	return nil
}

type streamState struct {
	p         *Provider
	finished  bool
	finish    string
	stop      string // the stop sequence the upstream named with its finish
	usage     *execution.TokenUsage
	meta      bool // the upstream's identity was reported
	content   utf16Joiner
	reasoning utf16Joiner
}

// chunk is what the reader decodes of a chat.completion.chunk.
type chunk struct {
	Error  json.RawMessage `json:"error"`
	Object string          `json:"object"`
	answerID
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          json.RawMessage `json:"content"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ToolCalls        []toolCallChunk `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
		oaicodec.StopNamed
	} `json:"choices"`
	Usage *eventstream.Usage `json:"usage"`
}

type toolCallChunk struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// handle processes one SSE event. It reports done on [DONE].
func (st *streamState) handle(ev eventstream.Event, emit *execution.Emitter) (bool, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return false, nil
	}
	if string(data) == "[DONE]" {
		st.finished = true
		return true, nil
	}
	var c chunk
	if ev.Oversize || json.Unmarshal(data, &c) != nil {
		st.p.malformed()
		return false, nil
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, execution.UpstreamFailure(eventstream.ParseErrorObject(c.Error))
	}
	if c.Object == "error" {
		return false, execution.UpstreamFailure(eventstream.ParseErrorObject(data))
	}
	st.startMeta(&c, emit)
	if c.Usage != nil {
		st.usage = c.Usage.TokenUsage()
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // n > 1 is tunnel-only
		}
		out := execution.RunEvent{Type: execution.EventTypeDelta}
		out.Delta = st.content.decode(ch.Delta.Content)
		if r := ch.Delta.ReasoningContent; len(r) > 0 && string(r) != "null" {
			out.Reasoning = st.reasoning.decode(r)
		} else {
			out.Reasoning = st.reasoning.decode(ch.Delta.Reasoning)
		}
		for _, tc := range ch.Delta.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, execution.ToolCallDelta{Index: tc.Index, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if out.HasContent() {
			emit.Emit(out)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finished, st.finish, st.stop = true, *ch.FinishReason, ch.Sequence()
		}
	}
	return false, nil
}

// startMeta reports the upstream's identity of the answer once, before
// any output, so renderers can keep its id, created time and fingerprint.
func (st *streamState) startMeta(c *chunk, emit *execution.Emitter) {
	if st.meta || c.answerID == (answerID{}) {
		return
	}
	st.meta = true
	emit.Emit(c.start())
}

// flush emits text held back at the end (a lone high surrogate the
// upstream never completed becomes U+FFFD, as a JSON decoder makes it).
func (st *streamState) flush(emit *execution.Emitter) {
	ev := execution.RunEvent{Type: execution.EventTypeDelta, Delta: st.content.rest(), Reasoning: st.reasoning.rest()}
	if ev.HasContent() {
		emit.Emit(ev)
	}
}

// answerID is the upstream's identity of an answer, in every chunk and
// in a whole completion.
type answerID struct {
	ID                string `json:"id"`
	Created           int64  `json:"created"`
	SystemFingerprint string `json:"system_fingerprint"`
	ServiceTier       string `json:"service_tier"`
}

// start is the event that reports it, so renderers keep it.
func (a answerID) start() execution.RunEvent {
	return execution.RunEvent{Type: execution.EventTypeStart, ResponseID: a.ID, Created: a.Created,
		SystemFingerprint: a.SystemFingerprint, ServiceTier: a.ServiceTier}
}
