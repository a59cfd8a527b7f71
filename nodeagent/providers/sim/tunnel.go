package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Tunnel implements [execution.Tunneler]: it answers an OpenAI-compatible
// HTTP request with the bytes an OpenAI-compatible server would send —
// JSON or SSE for /v1/chat/completions, /v1/responses and
// /v1/completions, vectors for /v1/embeddings, the model list for
// /v1/models — one body frame per event, with the same scripted faults as
// Execute.
func (p *Provider) Tunnel(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	path, _, _ := strings.Cut(req.Path, "?")
	switch {
	case req.Method == http.MethodGet && path == "/v1/models":
		return p.tunnelModels(emit)
	case req.Method == http.MethodPost && path == "/v1/embeddings":
		return p.tunnelEmbeddings(req, emit)
	case req.Method == http.MethodPost && path == "/v1/completions":
		return p.tunnelCompletions(ctx, req, emit)
	case req.Method == http.MethodPost && path == "/v1/moderations":
		return p.tunnelModerations(req, emit)
	case req.Method == http.MethodPost && path == "/v1/images/generations":
		return p.tunnelImages(req, emit)
	case req.Method == http.MethodPost && path == "/v1/images/edits":
		return p.tunnelImageEdits(req, emit)
	case req.Method == http.MethodPost && (path == "/v1/audio/transcriptions" || path == "/v1/audio/translations"):
		return p.tunnelTranscription(req, emit)
	case req.Method == http.MethodPost && path == "/v1/audio/speech":
		return p.tunnelSpeech(req, emit)
	case req.Method == http.MethodPost && path == "/v1/rerank":
		return p.tunnelRerank(req, emit)
	case req.Method == http.MethodPost && path == "/v1/messages":
		return p.tunnelMessages(ctx, req, emit)
	case req.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		return p.tunnelCountTokens(req, emit)
	case req.Method == http.MethodPost && path == "/v1/chat/completions":
		r, e := openai.DecodeChatRequest(req.Body, openai.Limits{})
		if e != nil {
			return respondError(emit, e)
		}
		if r.Neutral != nil { // a content part the sim cannot read, not answered as if absent
			return respondError(emit, r.Neutral)
		}
		if r.N > 1 { // refused, not answered with fewer choices than asked
			return respondError(emit, openai.InvalidRequest("n", "iop-sim makes one choice a request: n must be 1"))
		}
		run := r.RunRequest()
		if e := cmp.Or(logprobsRefusal(req.Body), reasoningRefusal(req.Body), outputRefusal(req.Body), toolChoiceRefusal(run.Params)); e != nil {
			return respondError(emit, e)
		}
		if r.Stream {
			s := openai.NewChatStream(openai.NewChatID(), r.Model, time.Now().Unix(), r.IncludeUsage)
			return p.tunnelStream(ctx, run, emit, respondError, s.Append)
		}
		acc := openai.NewChatAccumulator(openai.NewChatID(), r.Model, time.Now().Unix())
		return p.tunnelJSON(ctx, run, emit, respondError, acc.Add, acc.Body)
	case req.Method == http.MethodPost && path == "/v1/responses":
		return p.tunnelResponses(ctx, req, emit)
	case req.Method == http.MethodPost && path == "/v1/responses/input_tokens":
		return p.tunnelInputTokens(req, emit)
	case strings.HasPrefix(path, "/v1/responses/"):
		return respondError(emit, storedNotFound(path))
	}
	return respondError(emit, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest,
		Message: "Invalid URL (" + req.Method + " " + path + ")"})
}

func header(contentType string) map[string][]string {
	return map[string][]string{
		"Content-Type": {contentType},
		"X-Request-Id": {"req_" + strconv.FormatInt(time.Now().UnixNano(), 36)},
	}
}

func respondError(emit *execution.FrameEmitter, e *openai.Error) error {
	h := header("application/json")
	if e.Status == http.StatusTooManyRequests {
		h["Retry-After-Ms"] = []string{"1000"}
		h["Retry-After"] = []string{"1"}
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: e.Status, Header: h})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: e.Body()})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}

// respondJSON answers 200 with v as JSON, and the usage the node
// reports for it (nil: none).
func respondJSON(emit *execution.FrameEmitter, v any, u *execution.TokenUsage) error {
	b, _ := json.Marshal(v)
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: http.StatusOK, Header: header("application/json")})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: b})
	if u != nil {
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: u})
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}

func (p *Provider) tunnelModels(emit *execution.FrameEmitter) error {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, m := range p.cfg.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", Created: 1700000000, OwnedBy: "iop-sim"})
	}
	return respondJSON(emit, list, nil)
}

// scriptedError answers the plan's error status, if any.
// errorWriter answers with an error in the request's API shape.
type errorWriter func(*execution.FrameEmitter, *openai.Error) error

func (p *Provider) scriptedError(pl plan, emit *execution.FrameEmitter, respond errorWriter) bool {
	if pl.errorStatus == 0 {
		return false
	}
	ue := upstreamError(pl.errorStatus)
	_ = respond(emit, &openai.Error{Status: ue.Status, Type: ue.Type, Code: ue.Code, Param: ue.Param, Message: ue.Message})
	return true
}

// tunnelStream streams the answer as SSE, one body frame per event.
func (p *Provider) tunnelStream(ctx context.Context, run *execution.RunRequest, emit *execution.FrameEmitter, respond errorWriter,
	render func([]byte, execution.RunEvent) []byte) error {
	pl := p.nextPlan()
	if p.scriptedError(pl, emit, respond) {
		return nil
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: http.StatusOK, Header: header("text/event-stream; charset=utf-8")})
	a := p.compose(run)
	if err := sleep(ctx, p.cfg.FirstTokenDelay); err != nil {
		return err
	}
	body := render(nil, execution.RunEvent{Type: execution.EventTypeStart, Model: run.Model})
	for i := 0; i < a.steps(); i++ {
		if err := p.beforeStep(ctx, pl, i); err != nil {
			if i == pl.malformedAt {
				emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: []byte("data: {\"id\":\"chatcmpl-broken\",\"choices\":[{\n\n")})
				continue
			}
			return err
		}
		body = render(body[:0], a.event(i))
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: append([]byte(nil), body...)})
	}
	u := a.usage()
	body = render(body[:0], execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: a.finish, Usage: u})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: body})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: u})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}

// tunnelJSON answers with one JSON body after the whole answer.
func (p *Provider) tunnelJSON(ctx context.Context, run *execution.RunRequest, emit *execution.FrameEmitter, respond errorWriter,
	add func(execution.RunEvent), body func() []byte) error {
	pl := p.nextPlan()
	if p.scriptedError(pl, emit, respond) {
		return nil
	}
	a := p.compose(run)
	add(execution.RunEvent{Type: execution.EventTypeStart, Model: run.Model})
	if err := sleep(ctx, p.cfg.FirstTokenDelay); err != nil {
		return err
	}
	for i := 0; i < a.steps(); i++ {
		if err := p.beforeStep(ctx, pl, i); err != nil {
			return err
		}
		add(a.event(i))
	}
	u := a.usage()
	add(execution.RunEvent{Type: execution.EventTypeComplete, FinishReason: a.finish, Usage: u})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: http.StatusOK, Header: header("application/json")})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: body()})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeUsage, Usage: u})
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}
