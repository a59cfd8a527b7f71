package streamgate

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/iopgw/iop/codec/eventstream"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/internal/httphdr"
	"github.com/iopgw/iop/surface"
)

// tunnelMode is how a tunnelled response body is handled.
type tunnelMode int

const (
	tunnelHead   tunnelMode = iota // no response_start yet
	tunnelError                    // an error status: buffered for failover or passthrough
	tunnelBuffer                   // a whole (JSON) body: buffered, written at the end
	tunnelStream                   // an event stream: written as it arrives
	tunnelRaw                      // a binary body (audio, an image): written as it arrives
)

func (m tunnelMode) String() string {
	return [...]string{"head", "error", "buffer", "stream", "raw"}[m]
}

// tunnelState is the per-attempt state of a tunnelled response.
type tunnelState struct {
	surface *surface.Surface
	mode    tunnelMode
	status  int
	// header is the upstream's head, for an answer still to be read
	// whole (an error's, a buffered body's); a streamed or binary
	// answer's went to the responder (setHead), which writes it, and the
	// tunnel keeps only its content type.
	header      http.Header
	contentType string
	buf         []byte
	// obs follows the stream's events (framing parsed, JSON decoded): its
	// own terminal, an error event, tool calls, Responses sequence numbers.
	obs *eventstream.Observer
	// decided: the first event was seen and was not an error, so the
	// bytes held before it went out.
	decided bool
	// reshape, when set, turns a whole answer into the client's surface
	// (Request.Reshape, for an attempt on the Tunnel form).
	reshape func(status int, header http.Header, body []byte) (int, http.Header, []byte)
	// output is the delivered body's output when it was read with its
	// usage (outputRead; otherwise it is read from buf).
	output     eventstream.Output
	outputRead bool
}

// maxTunnelBuffer bounds a buffered (non-streaming or error) tunnel body;
// past it the body streams through, committed.
const maxTunnelBuffer = 8 << 20

func newTunnelState(s *surface.Surface) *tunnelState { return &tunnelState{surface: s} }

// dialect is the event dialect of the surface's streams.
func (t *tunnelState) dialect() eventstream.Dialect { return t.surface.Dialect }

// nextSeq is the sequence_number of an event appended to the stream.
func (t *tunnelState) nextSeq() int64 {
	if t.obs == nil {
		return 0
	}
	return t.obs.NextSeq()
}

// frame handles one tunnel frame; non-nil when the attempt ended.
func (ar *attemptRun) frame(f *execution.ProviderTunnelFrame) *outcome {
	t, rt := ar.tun, ar.rt
	switch f.Type {
	case execution.FrameTypeResponseStart:
		ar.responseStart(f)
	case execution.FrameTypeBody:
		if t.mode != tunnelError {
			ar.output()
		}
		return ar.tunnelBody(f.Body)
	case execution.FrameTypeUsage:
		rt.sum.Usage = f.Usage
	case execution.FrameTypeEnd:
		return ar.tunnelEnd()
	case execution.FrameTypeError:
		return failureOutcome(f.Failure)
	}
	return nil
}

// responseStart takes the upstream's status and headers: how the body
// is carried follows from them (apart from frame, whose frame is under
// every write's).
func (ar *attemptRun) responseStart(f *execution.ProviderTunnelFrame) {
	t, rt := ar.tun, ar.rt
	t.status, t.header = f.Status, httphdr.ForClient(http.Header(f.Header))
	t.contentType = t.header.Get("Content-Type")
	format, stream := eventstream.FormatFor(t.contentType)
	switch {
	case f.Status >= 400:
		t.mode = tunnelError
	case stream:
		t.mode = tunnelStream
		t.obs = eventstream.NewObserver(t.dialect(), format)
		rt.resp.setHead(f.Status, t.header)
		t.header = nil
	case isBinary(t.contentType):
		t.mode = tunnelRaw
		rt.resp.setHead(f.Status, t.header)
		t.header = nil
	default:
		t.mode = tunnelBuffer
		rt.resp.setHead(f.Status, t.header)
	}
}

// buffered adds p to a body being buffered (an error's, a whole JSON
// body's), and returns nil while it fits; past maxTunnelBuffer the body
// goes out as it arrives instead, and what was buffered is returned to
// go out: an event stream observed as one, any other body (a large batch
// of embeddings) passed through as a binary one is, its end the
// upstream's.
func (ar *attemptRun) buffered(p []byte) []byte {
	t := ar.tun
	t.buf = append(t.buf, p...)
	if len(t.buf) <= maxTunnelBuffer {
		return nil
	}
	if t.mode == tunnelError {
		// An error body this large is not an error body we can retry on.
		ar.rt.resp.setHead(t.status, t.header)
	}
	p, t.buf, t.header = t.buf, nil, nil
	format, stream := eventstream.FormatFor(t.contentType)
	if !stream {
		t.mode = tunnelRaw
		return p
	}
	t.mode = tunnelStream
	t.obs = eventstream.NewObserver(t.dialect(), format)
	t.decided = true
	return p
}

func (ar *attemptRun) tunnelBody(p []byte) *outcome {
	t, rt := ar.tun, ar.rt
	switch t.mode {
	case tunnelError, tunnelBuffer:
		if p = ar.buffered(p); p == nil {
			return nil
		}
		if t.mode == tunnelRaw {
			return ar.rawOut(p)
		}
	case tunnelHead:
		return &outcome{kind: outAbnormal}
	case tunnelRaw:
		return ar.rawOut(p)
	}
	t.obs.Feed(p)
	if t.obs.ToolCall {
		rt.sawToolCall = true
	}
	if !t.decided {
		return ar.firstEvent(p)
	}
	if err := ar.out(p); err != nil {
		return clientGone(err)
	}
	return nil
}

// rawOut writes a body read as bytes, not events.
func (ar *attemptRun) rawOut(p []byte) *outcome {
	if err := ar.out(p); err != nil {
		return clientGone(err)
	}
	return nil
}

// firstEvent holds a stream's bytes until its first event is complete:
// an upstream that reports an error as the first event of a 200 stream
// (how several servers answer a bad stream request) gets the same
// treatment as an error status — its own status class, failover when
// that is a server error — since nothing was committed to the client.
func (ar *attemptRun) firstEvent(p []byte) *outcome {
	t := ar.tun
	held := p // the first event is whole in the first read: nothing to keep
	if len(t.buf) > 0 || t.obs.Events == 0 {
		t.buf = append(t.buf, p...)
		if t.obs.Events == 0 && len(t.buf) <= maxTunnelBuffer {
			return nil
		}
		held = t.buf
	}
	if t.obs.FirstIsError {
		return &outcome{kind: outUpstream, upstream: t.obs.Err}
	}
	t.decided = true
	t.buf = nil
	if err := ar.out(held); err != nil {
		return clientGone(err)
	}
	return nil
}

// observed is the usage of a tunnelled answer: what the bytes the client
// received reported, else what the node reported (nil when neither did:
// usage is never invented).
func observed(seen, reported *execution.TokenUsage) *execution.TokenUsage {
	if seen != nil {
		return seen
	}
	return reported
}

func (ar *attemptRun) tunnelEnd() *outcome {
	t, rt := ar.tun, ar.rt
	switch t.mode {
	case tunnelError:
		head, body := t.header, t.buf
		if t.reshape != nil {
			_, head, body = t.reshape(t.status, head, body)
		}
		return &outcome{kind: outUpstream, upstream: upstreamFromTunnel(t.status, t.header, t.buf), errHead: head, errBody: body}
	case tunnelBuffer:
		if o := ar.wholeAnswer(); o != nil {
			return o
		}
		if t.reshape != nil {
			t.status, t.header, t.buf = t.reshape(t.status, t.header, t.buf)
		}
		if err := rt.resp.respond(t.status, t.header, t.buf); err != nil {
			return clientGone(err)
		}
	case tunnelRaw:
		// A binary body has no terminal of its own: the upstream's end
		// (the attempt's end frame) is its end.
		if err := ar.finishOut(nil); err != nil {
			return clientGone(err)
		}
		if rt.resp.State() == TransportUncommitted {
			_ = rt.resp.respondHead()
		}
	case tunnelStream:
		t.obs.Close()
		rt.sum.Usage, rt.sum.ResponseID = observed(t.obs.Usage, rt.sum.Usage), t.obs.ResponseID
		if !t.decided && t.obs.FirstIsError {
			return &outcome{kind: outUpstream, upstream: t.obs.Err}
		}
		if !t.obs.Terminal() && t.status < 300 {
			// A clean close without the stream's own terminal is a
			// truncation, never a success.
			return &outcome{kind: outAbnormal}
		}
		held := t.buf
		t.buf, t.decided = nil, true
		if err := ar.finishOut(held); err != nil {
			return clientGone(err)
		}
		if rt.resp.State() == TransportUncommitted {
			// A streaming answer with an empty body: send its head.
			_ = rt.resp.respondHead()
		}
	default:
		return &outcome{kind: outAbnormal}
	}
	rt.resp.terminal()
	return &outcome{kind: outSuccess}
}

// wholeAnswer reads a whole (buffered) answer's usage, output and
// response id from one parse. An answer that is not one — an empty, cut
// or malformed body, a body that is not JSON where the API answers JSON
// (everywhere but the media surfaces' text transcripts), or a whole JSON
// body where the client asked for an event stream, which its SDK would
// read as an empty stream — is the provider's failure, never a success:
// nothing was committed, so it fails over as a server error would.
func (ar *attemptRun) wholeAnswer() *outcome {
	t, rt := ar.tun, ar.rt
	jsonType := strings.Contains(strings.ToLower(t.contentType), "json")
	if !jsonType && t.surface.Dialect == eventstream.DialectAudio || t.status >= 300 || t.status == http.StatusNoContent || t.status == http.StatusResetContent {
		return nil // a transcript as text, srt or vtt; a redirect; no content by status
	}
	a := eventstream.ReadAnswer(t.buf)
	if !a.Whole && rt.req.Stream && t.reshape == nil && len(t.buf) > 0 {
		if o, ok := ar.mislabelledStream(); ok {
			return o
		}
	}
	switch {
	case len(t.buf) == 0:
		return invalidAnswer(fmt.Sprintf("The provider answered HTTP %d with an empty body.", t.status))
	case !a.Whole:
		return invalidAnswer(fmt.Sprintf("The provider answered HTTP %d with a body that is not whole JSON (cut or malformed).", t.status))
	case a.Err != nil:
		// An error reported with a success status, as a 200 stream's
		// first event may report one: its own status class.
		return &outcome{kind: outUpstream, upstream: a.Err}
	case rt.req.Stream && t.surface.Dialect != eventstream.DialectOllama && t.surface.Dialect != eventstream.DialectAudio && !ar.completionAsStream():
		// Ollama's whole answer is one line of its stream; the others' are not events.
		return invalidAnswer("The provider answered a streaming request with a whole JSON body instead of an event stream.")
	}
	if t.reshape == nil { // the client gets this body: its output (and id) come from the same parse
		t.output, t.outputRead, rt.sum.ResponseID = a.Output, true, a.ResponseID
	}
	rt.sum.Usage = observed(a.Usage, rt.sum.Usage)
	return nil
}

// completionAsStream turns a whole chat.completion that answered a Chat
// streaming request (a server that does not stream) into the stream of
// that answer — its identity, the message as one delta, the finish,
// usage when the client asked for it, [DONE] — when the stream carries
// all of it (one choice; no log probabilities, refusal, annotations or
// audio, which a stream would carry otherwise); false when it does not,
// or the surface is not Chat.
func (ar *attemptRun) completionAsStream() bool {
	t, rt := ar.tun, ar.rt
	if t.surface != surface.Chat || t.reshape != nil {
		return false
	}
	evs, lost, ok := openai.CompletionEvents(t.buf)
	if !ok || lost != "" {
		return false
	}
	s := openai.NewChatStream("", rt.req.Model, 0, rt.req.IncludeUsage) // the answer's own identity, from its start event
	var out []byte
	for _, ev := range evs {
		out = s.Append(out, ev)
	}
	t.buf = out
	t.header.Set("Content-Type", "text/event-stream")
	t.header.Del("Content-Length")
	return true
}

// mislabelledStream reads the answer to a streaming request that came
// with a content type other than a stream's (a server labelling its
// events text/plain or application/json) as the surface's stream, with
// the event parser: a whole one, ended by its own terminal, passes as it
// came (held whole, unchanged); one whose first event is an error is
// that error; one cut before its terminal is abnormal. False when the
// body holds no events at all.
func (ar *attemptRun) mislabelledStream() (*outcome, bool) {
	t, rt := ar.tun, ar.rt
	format := eventstream.FormatSSE
	if t.surface.Dialect == eventstream.DialectOllama {
		format = eventstream.FormatNDJSON
	}
	obs := eventstream.NewObserver(t.surface.Dialect, format)
	obs.Feed(t.buf)
	obs.Close()
	switch {
	case obs.Events == 0 || obs.Malformed == obs.Events:
		return nil, false
	case obs.FirstIsError:
		return &outcome{kind: outUpstream, upstream: obs.Err}, true
	case !obs.Terminal():
		return invalidAnswer("The provider's stream ended without its terminal event."), true
	}
	rt.sum.Usage, rt.sum.ResponseID = observed(obs.Usage, rt.sum.Usage), obs.ResponseID
	t.output, t.outputRead = obs.Output, true
	return nil, true
}

// invalidAnswer is the outcome of a success status whose body is not an
// answer: a bad gateway, failed over like a server error.
func invalidAnswer(msg string) *outcome {
	return &outcome{kind: outUpstream, upstream: &execution.UpstreamError{Status: http.StatusBadGateway, Type: openai.TypeUpstream, Code: codeUpstreamError, Message: msg}}
}

// endedBeforeLoss ends a tunnel stream whose own end marker ([DONE],
// response.completed, done, message_stop) had already arrived when its
// attempt broke — the node or its link went away after the last byte,
// before the end frame: the client has the whole answer, so the stream
// ends as the upstream ended it, never with an error after its end. Nil
// when that is not the case.
func (ar *attemptRun) endedBeforeLoss() *outcome {
	t, rt := ar.tun, ar.rt
	if t == nil || t.mode != tunnelStream || t.obs == nil || !t.obs.Ended || t.obs.Err != nil || t.status >= 300 {
		return nil
	}
	rt.sum.Usage, rt.sum.ResponseID = observed(t.obs.Usage, rt.sum.Usage), t.obs.ResponseID
	held := t.buf
	t.buf, t.decided = nil, true
	if err := ar.finishOut(held); err != nil {
		return clientGone(err)
	}
	rt.resp.terminal()
	return &outcome{kind: outSuccess}
}

// isBinary reports whether a content type is a media body (audio, image,
// video, octet-stream) that passes through as it arrives: nothing in it
// is read, and buffering it whole would only delay it.
func isBinary(ct string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(ct)), ";")
	return strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "image/") || strings.HasPrefix(mt, "video/") || mt == "application/octet-stream"
}
