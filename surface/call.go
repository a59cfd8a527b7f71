package surface

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"time"

	"github.com/iopgw/iop/codec/anthropic"
	"github.com/iopgw/iop/codec/ollama"
	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// Call is a decoded request: what the edge needs of it to admit, route
// and serve it. The body itself travels as it came (the tunnel and
// native forms), parsed once here.
type Call struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// Run is the normalized form, for the translated path; nil when the
	// request only tunnels (or goes native).
	Run *execution.RunRequest
	// Untranslated, when set, says why the request has no translated
	// form: only a provider serving the surface natively can take it
	// (Run is nil).
	Untranslated *openai.Error
	// Refuse says why Run cannot go to a provider of an adapter on the
	// translated path (nil when it can).
	Refuse func(adapter string) *openai.Error
	// Echo is what a rendered Responses answer echoes of the request.
	Echo openai.ResponseEcho
	// SideEffects: the request asks for server-executed tools.
	SideEffects bool
	// OutputLimit is the request's own output limit when it has no Run to
	// carry one (0: none).
	OutputLimit int64
	// TunnelPath and TunnelBody, when set, are the OpenAI request the
	// tunnel form sends instead of the client's own (Ollama's embed as
	// OpenAI embeddings), with Reshape turning the answer back. TunnelBody
	// alone is the client's request naming the model it was routed to by
	// default (a moderation without a model).
	TunnelPath string
	TunnelBody []byte
	Reshape    func(status int, header http.Header, body []byte) (int, http.Header, []byte)
	// DefaultModel: the request named no model, and Model is the one its
	// API defaults to.
	DefaultModel bool
	// Checked: the decode checked the client's body with jsonstrict (its
	// grammar and strict rules), so what reads it again need not.
	Checked bool
	// Prefill: the request ends with an assistant message its answer
	// continues (an Anthropic client's prefill); Run is a Continuation.
	Prefill bool
	// Answer, when set, is the whole answer (200, JSON) of a request that
	// asks for no generation: an Ollama load or unload (of a generating or
	// an embedding model), which iop acknowledges itself and sends to no
	// provider.
	Answer []byte
}

func decodeChat(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	req, e := openai.CheckChatRequest(body, lim) // the run carries its messages in its ChatBody
	if e != nil {
		return nil, e
	}
	run := req.RunRequest()
	run.ChatBody, run.Stream = body, req.Stream
	c := &Call{Model: req.Model, Stream: req.Stream, IncludeUsage: req.IncludeUsage, Run: run,
		Refuse: translationRefusal(nil, req.Neutral, body), Checked: true}
	if req.N > 1 {
		c.Run = nil // n > 1 is tunnel-only
	}
	return c, nil
}

func decodeResponses(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	req, e := openai.DecodeResponsesRequest(body, lim)
	if e != nil {
		return nil, e
	}
	run := req.RunRequest()
	chatBody, terr := openai.ResponsesToChat(body)
	run.ChatBody, run.Stream = chatBody, req.Stream
	c := &Call{Model: req.Model, Stream: req.Stream, Run: run, Echo: req.Echo(), SideEffects: req.ServerTools,
		Refuse: translationRefusal(terr, req.Neutral, chatBody), Checked: true}
	c.Echo.Store = new(false) // a translated response is not stored anywhere
	if terr != nil {
		// State, server tools and the like live upstream: only a provider
		// that serves the Responses API natively can take the request.
		c.Run, c.Untranslated = nil, terr
	}
	return c, nil
}

// decodeInputTokens reads a Responses token count: checked as a Responses
// request is (its input optional), and routed by its model, to the
// provider keeping the previous response it names.
func decodeInputTokens(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	req, e := openai.DecodeInputTokensRequest(body, lim)
	if e != nil {
		return nil, e
	}
	c := &Call{Model: req.Model, Checked: true}
	c.Echo.PreviousResponseID = req.PreviousResponseID
	return c, nil
}

// decodeTunnelOnly reads the model and stream flag of an OpenAI request
// that only tunnels (embeddings, legacy completions, moderations, images,
// rerank).
func decodeTunnelOnly(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	return decodeTunnel(body, lim, true)
}

// decodeTunnelOnlyOr is decodeTunnelOnly for a surface whose API names a
// default model: a request without one is routed to that model, and the
// body sent upstream names it (the one insertion, every other byte as the
// client sent it), so an upstream that would default otherwise, or not
// at all, serves the model the request was routed to.
func decodeTunnelOnlyOr(model string) func([]byte, openai.Limits) (*Call, *openai.Error) {
	return func(body []byte, lim openai.Limits) (*Call, *openai.Error) {
		c, e := decodeTunnel(body, lim, false)
		if e != nil || c.Model != "" {
			return c, e
		}
		nb, err := openai.WithModel(body, model)
		if err != nil {
			return nil, openai.InvalidRequest("", "Invalid type in the request body: %v.", err)
		}
		c.Model, c.TunnelBody, c.DefaultModel = model, nb, true
		return c, nil
	}
}

// decodeTunnel reads a tunnelled request's model and stream flag; a
// missing model is an error when required, else left empty.
func decodeTunnel(body []byte, lim openai.Limits, required bool) (*Call, *openai.Error) {
	if e := openai.CheckBody(body, lim); e != nil {
		return nil, e
	}
	var head struct {
		Model  *string `json:"model"`
		Stream *bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, openai.InvalidRequest("", "Invalid type in the request body: %v.", err)
	}
	// Absent, the model may be defaulted; null or empty, it is missing.
	if head.Model == nil && (required || hasNullModel(body)) || head.Model != nil && *head.Model == "" {
		return nil, openai.InvalidRequest("model", "you must provide a model parameter")
	}
	c := &Call{Stream: head.Stream != nil && *head.Stream, Checked: true}
	if head.Model != nil {
		c.Model = *head.Model
	}
	return c, nil
}

// decodeMessages reads a Messages request, and its lossless translation
// into a Chat request for providers that serve Chat only; a request that
// does not translate goes to providers serving the messages surface, or
// is refused naming what Chat cannot express.
// decodeForm reads the model (and stream flag) of a multipart/form-data
// request — an audio file to transcribe, an image to edit — from its form
// fields; file parts are skipped, never copied (the body is already
// bounded by limits.max_body_bytes).
func decodeForm(body []byte, contentType string) (*Call, *openai.Error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, openai.InvalidRequest("", "This endpoint takes multipart/form-data (the request's Content-Type is %q).", clipType(contentType))
	}
	c := &Call{}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, openai.InvalidRequest("", "The multipart body could not be read: %v.", err)
		}
		if part.FileName() != "" {
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, 4096))
		if err != nil {
			return nil, openai.InvalidRequest("", "The multipart body could not be read: %v.", err)
		}
		switch part.FormName() {
		case "model":
			c.Model = string(v)
		case "stream":
			c.Stream = string(v) == "true"
		}
	}
	if c.Model == "" {
		return nil, openai.InvalidRequest("model", "you must provide a model parameter")
	}
	return c, nil
}

// hasNullModel reports whether body's top-level "model" member is there
// (as null: a string was decoded otherwise).
func hasNullModel(body []byte) bool {
	var m struct {
		Model json.RawMessage `json:"model"`
	}
	return json.Unmarshal(body, &m) == nil && m.Model != nil
}

func clipType(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

func decodeMessages(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	c, e := decodeAnthropic(body, lim, anthropic.Decode)
	if e != nil {
		return nil, e
	}
	chatBody, ae := anthropic.ToChat(body)
	if ae != nil {
		c.Untranslated = &openai.Error{Status: ae.Status, Type: openai.TypeInvalidRequest, Message: ae.Message}
		return c, nil
	}
	req, te := openai.CheckChatRequest(chatBody, lim) // the run carries its messages in its ChatBody
	if te != nil {
		c.Untranslated = te
		return c, nil
	}
	run := req.RunRequest()
	run.ChatBody, run.Stream = chatBody, c.Stream
	c.Run, c.Refuse = run, translationRefusal(nil, req.Neutral, chatBody)
	// A prefill (a trailing assistant message, which the Messages API
	// continues; Chat has no such rule) runs as a continuation, on a
	// provider that continues one.
	run.Continuation = c.Prefill
	return c, nil
}

func decodeCountTokens(body []byte, lim openai.Limits) (*Call, *openai.Error) {
	c, e := decodeAnthropic(body, lim, anthropic.DecodeCount)
	if c != nil {
		c.Prefill = false // counted, not continued
	}
	return c, e
}

// decodeAnthropic reads a Messages request: strict JSON as on every
// surface, then Anthropic's own checks (its messages, in its shape).
func decodeAnthropic(body []byte, lim openai.Limits, decode func([]byte) (*anthropic.Request, *anthropic.Error)) (*Call, *openai.Error) {
	if e := openai.CheckBody(body, lim); e != nil {
		return nil, e
	}
	req, ae := decode(body)
	if ae != nil {
		return nil, &openai.Error{Status: ae.Status, Type: openai.TypeInvalidRequest, Message: ae.Message}
	}
	return &Call{Model: req.Model, Stream: req.Stream, OutputLimit: req.MaxTokens, Checked: true, Prefill: req.Prefill}, nil
}

func decodeOllamaRun(generate bool) func([]byte, openai.Limits) (*Call, *openai.Error) {
	return func(body []byte, lim openai.Limits) (*Call, *openai.Error) {
		req, oe := ollama.Decode(body, generate, lim.MaxDepth)
		if oe != nil {
			return nil, &openai.Error{Status: oe.Status, Type: openai.TypeInvalidRequest, Message: oe.Message}
		}
		if req.Load != "" {
			return &Call{Model: req.Model, Stream: req.Stream, Answer: ollama.LoadAnswer(req.Model, generate, req.Load, time.Now()), Checked: true}, nil
		}
		chatBody, terr := ollama.ToChat(body, generate)
		run := &execution.RunRequest{Model: req.Model, Messages: req.Messages, Params: req.Params, ChatBody: chatBody, Stream: req.Stream}
		// An OpenAI-compatible upstream gets the Chat body, any other
		// provider the neutral form: each refuses what its form lost.
		refuse := func(adapter string) *openai.Error {
			lost := req.Refusal()
			if adapter == "openai" {
				lost = terr
			}
			if lost == nil {
				return nil
			}
			return openai.InvalidRequest("", "%s", lost.Message)
		}
		return &Call{Model: req.Model, Stream: req.Stream, Run: run, Refuse: refuse, Checked: true}, nil
	}
}

func decodeOllamaEmbed(legacy bool) func([]byte, openai.Limits) (*Call, *openai.Error) {
	return func(body []byte, _ openai.Limits) (*Call, *openai.Error) {
		req, e := ollama.DecodeEmbed(body, legacy)
		if e != nil {
			return nil, e
		}
		if len(req.Input) == 0 { // a load: nothing to embed
			return &Call{Model: req.Model, Answer: req.LoadAnswer()}, nil
		}
		return &Call{Model: req.Model, TunnelPath: Embeddings.Path, TunnelBody: req.OpenAIBody(), Reshape: embedReshape(req, time.Now())}, nil
	}
}

// embedReshape turns an OpenAI embeddings answer (or error) into the
// Ollama answer of req; an answer that does not translate is a 502 in
// Ollama's error shape, never a made-up vector.
func embedReshape(req ollama.EmbedRequest, start time.Time) func(int, http.Header, []byte) (int, http.Header, []byte) {
	return func(status int, h http.Header, body []byte) (int, http.Header, []byte) {
		out := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
		if id := h.Get("X-Request-Id"); id != "" {
			out.Set("X-Request-Id", id)
		}
		if status >= 400 {
			ue := openai.ParseError(status, h, body)
			return status, out, (&ollama.Error{Status: status, Message: ue.Message}).Body()
		}
		b, err := req.FromOpenAI(body, time.Since(start))
		if err != nil {
			return http.StatusBadGateway, out, (&ollama.Error{Status: http.StatusBadGateway, Message: err.Error()}).Body()
		}
		return status, out, b
	}
}

// translationRefusal says why a request cannot take the translated path
// to a provider of a given adapter: terr, when the request could not be
// translated into a Chat body (OpenAI-compatible upstreams); for an
// adapter that reads the neutral form (Ollama, the sim) rather than the
// Chat body, also what that form lost; for an Ollama-native upstream, a
// Chat field Ollama cannot honour.
func translationRefusal(terr, neutral *openai.Error, chatBody []byte) func(adapter string) *openai.Error {
	return func(adapter string) *openai.Error {
		if terr != nil {
			return terr
		}
		if adapter == "openai" {
			return nil // it gets the Chat body itself
		}
		if neutral != nil {
			return neutral
		}
		if adapter != "ollama" {
			return nil
		}
		if f := ollama.ChatRefusal(chatBody); f != "" {
			return openai.InvalidRequest(f, "'%s' cannot be used with this model: its provider (Ollama) has no equivalent.", f)
		}
		return nil
	}
}
