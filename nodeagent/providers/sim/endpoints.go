package sim

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// The sim's answers to OpenAI's embeddings and legacy completions
// endpoints, so `iop dev` serves them with nothing else installed:
// embeddings are stable vectors derived from the input (the same text
// always gets the same unit vector), completions the sim's usual answer as
// text_completion objects, streamed or not.

// defaultDimensions is the length of a sim embedding when the request
// does not ask for one (dimensions).
const defaultDimensions = 64

// embeddingRequest is the part of OpenAI's embeddings request the sim
// reads.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// textInputs reads an input or prompt: a string, an array of strings, an
// array of token ids or an array of those (each becomes one text; no ids,
// the empty text).
func textInputs(raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, nil
	}
	var tokens []int64
	if json.Unmarshal(raw, &tokens) == nil {
		return []string{tokenText(tokens)}, nil
	}
	var batches [][]int64
	if json.Unmarshal(raw, &batches) == nil {
		out := make([]string, len(batches))
		for i, b := range batches {
			out[i] = tokenText(b)
		}
		return out, nil
	}
	return nil, fmt.Errorf("input must be a string, an array of strings, or an array of token arrays")
}

// embeddingInputs reads an embeddings input (textInputs); an empty text
// or token array is refused, as OpenAI refuses it: it has no embedding.
func embeddingInputs(raw json.RawMessage) ([]string, error) {
	inputs, err := textInputs(raw)
	if err != nil {
		return nil, err
	}
	return nonEmpty(inputs)
}

// tokenText is the text the sim embeds for token ids ("" for none).
func tokenText(tokens []int64) string {
	if len(tokens) == 0 {
		return ""
	}
	return fmt.Sprint(tokens)
}

func nonEmpty(inputs []string) ([]string, error) {
	for i, s := range inputs {
		if s == "" {
			return nil, fmt.Errorf("input[%d] is empty: there is nothing to embed", i)
		}
	}
	return inputs, nil
}

// tunnelEmbeddings answers POST /v1/embeddings.
func (p *Provider) tunnelEmbeddings(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r embeddingRequest
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	inputs, err := embeddingInputs(r.Input)
	switch {
	case len(r.Input) == 0:
		return respondError(emit, openai.InvalidRequest("input", "'input' is a required property"))
	case err != nil:
		return respondError(emit, openai.InvalidRequest("input", "%v", err))
	case len(inputs) == 0 || len(inputs) > 2048:
		return respondError(emit, openai.InvalidRequest("input", "input must hold 1 to 2048 items"))
	}
	dims := defaultDimensions
	if r.Dimensions != nil {
		if *r.Dimensions < 1 || *r.Dimensions > 4096 {
			return respondError(emit, openai.InvalidRequest("dimensions", "dimensions must be between 1 and 4096"))
		}
		dims = *r.Dimensions
	}
	if r.EncodingFormat != "" && r.EncodingFormat != "float" && r.EncodingFormat != "base64" {
		return respondError(emit, openai.InvalidRequest("encoding_format", "encoding_format must be float or base64"))
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string         `json:"object"`
		Data   []item         `json:"data"`
		Model  string         `json:"model"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: r.Model}
	tokens := 0
	for i, in := range inputs {
		v := embed(r.Model, in, dims)
		var e any = v
		if r.EncodingFormat == "base64" {
			e = base64Floats(v)
		}
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: e})
		tokens += max(1, len(strings.Fields(in)))
	}
	out.Usage = map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}
	return respondJSON(emit, out, &execution.TokenUsage{PromptTokens: int64(tokens), TotalTokens: int64(tokens)})
}

// embed is the sim's embedding of text: dims components drawn from
// SHA-256 of (model, text, block), scaled to a unit vector. Stable: the
// same model and text always give the same vector.
func embed(model, text string, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for i := 0; i < dims; i += 8 {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", model, text, i/8)))
		for j := 0; j < 8 && i+j < dims; j++ {
			x := float64(int32(binary.LittleEndian.Uint32(sum[4*j:]))) / math.MaxInt32
			v[i+j] = float32(x)
			norm += x * x
		}
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / norm)
		}
	}
	return v
}

// base64Floats is OpenAI's base64 encoding of an embedding: the
// little-endian float32 bytes.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// completionRequest is the part of a legacy completions request the sim
// reads.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	MaxTokens     *int64          `json:"max_tokens"`
	Stop          json.RawMessage `json:"stop"`
	Echo          bool            `json:"echo"`
	N             *int            `json:"n"`
	BestOf        *int            `json:"best_of"`
	Logprobs      *int            `json:"logprobs"`
	Suffix        *string         `json:"suffix"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// refusal is the error of what the sim cannot make: it answers one
// prompt with one choice, appends nothing after it and makes no log
// probabilities — refused naming the field, never answered with less.
func (r *completionRequest) refusal(prompts int) *openai.Error {
	switch {
	case prompts > 1:
		return openai.InvalidRequest("prompt", "iop-sim answers one prompt a request: send each prompt in a request of its own.")
	case r.N != nil && *r.N > 1:
		return openai.InvalidRequest("n", "iop-sim makes one choice a request: n must be 1.")
	case r.BestOf != nil && *r.BestOf > 1:
		return openai.InvalidRequest("best_of", "iop-sim makes one choice a request: best_of must be 1.")
	case r.Logprobs != nil:
		return openai.InvalidRequest("logprobs", "iop-sim makes no log probabilities: leave logprobs unset.")
	case r.Suffix != nil && *r.Suffix != "":
		return openai.InvalidRequest("suffix", "iop-sim does not insert text before a suffix: leave suffix unset.")
	}
	return nil
}

// tunnelCompletions answers POST /v1/completions with the sim's answer
// to the prompt, as text_completion objects.
func (p *Provider) tunnelCompletions(ctx context.Context, req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r completionRequest
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	prompts, err := textInputs(r.Prompt)
	if len(r.Prompt) == 0 || err != nil || len(prompts) == 0 {
		return respondError(emit, openai.InvalidRequest("prompt", "prompt must be a string, an array of strings, or token arrays"))
	}
	if e := r.refusal(len(prompts)); e != nil {
		return respondError(emit, e)
	}
	stop, e := openai.DecodeStop(r.Stop, openai.Limits{})
	if e != nil {
		return respondError(emit, e)
	}
	run := &execution.RunRequest{Model: r.Model, Messages: []execution.Message{{Role: "user", Content: prompts[0]}},
		Params: execution.GenerationParams{MaxTokens: r.MaxTokens, Stop: stop}}
	c := &completion{id: "cmpl-" + strings.TrimPrefix(openai.NewChatID(), "chatcmpl-"), model: r.Model, created: time.Now().Unix(),
		usage: r.StreamOptions != nil && r.StreamOptions.IncludeUsage}
	if r.Echo {
		c.echo = prompts[0]
	}
	if r.Stream {
		return p.tunnelStream(ctx, run, emit, respondError, c.appendEvent)
	}
	return p.tunnelJSON(ctx, run, emit, respondError, c.add, c.body)
}

// completion renders one legacy completion.
type completion struct {
	id, model string
	created   int64
	usage     bool   // stream_options.include_usage
	echo      string // the prompt, when the request asked for it back (echo)
	text      strings.Builder
	finish    string
	u         *execution.TokenUsage
}

type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type completionUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// object is one text_completion object, its members in OpenAI's order.
func (c *completion) object(choices []completionChoice, u *execution.TokenUsage) []byte {
	o := struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []completionChoice `json:"choices"`
		Usage   *completionUsage   `json:"usage,omitempty"`
	}{ID: c.id, Object: "text_completion", Created: c.created, Model: c.model, Choices: choices}
	if u != nil {
		o.Usage = &completionUsage{u.PromptTokens, u.CompletionTokens, u.TotalTokens}
	}
	b, _ := json.Marshal(o)
	return b
}

// appendEvent renders ev as the stream's SSE events.
func (c *completion) appendEvent(buf []byte, ev execution.RunEvent) []byte {
	data := func(b []byte) { buf = append(append(append(buf, "data: "...), b...), "\n\n"...) }
	if c.echo != "" && (ev.Type == execution.EventTypeDelta || ev.Type == execution.EventTypeComplete) {
		data(c.object([]completionChoice{{Text: c.echo}}, nil)) // the prompt first, as echo asks
		c.echo = ""
	}
	switch ev.Type {
	case execution.EventTypeDelta:
		data(c.object([]completionChoice{{Text: ev.Delta}}, nil))
	case execution.EventTypeComplete:
		finish := ev.FinishReason
		data(c.object([]completionChoice{{FinishReason: &finish}}, nil))
		if c.usage && ev.Usage != nil {
			data(c.object([]completionChoice{}, ev.Usage))
		}
		buf = append(buf, "data: [DONE]\n\n"...)
	}
	return buf
}

// add gathers the answer for a JSON body.
func (c *completion) add(ev execution.RunEvent) {
	if c.echo != "" {
		c.text.WriteString(c.echo)
		c.echo = ""
	}
	switch ev.Type {
	case execution.EventTypeDelta:
		c.text.WriteString(ev.Delta)
	case execution.EventTypeComplete:
		c.finish, c.u = ev.FinishReason, ev.Usage
	}
}

func (c *completion) body() []byte {
	finish := c.finish
	return c.object([]completionChoice{{Text: c.text.String(), FinishReason: &finish}}, c.u)
}
