package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"strconv"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// maxImageSide bounds the sides of the image the sim draws.
const maxImageSide = 4096

// imageAsk is what an image request asks of the sim: how many images, of
// what size and in what format. The sim draws a flat grey image — of the
// size asked, 1×1 when the size is left to it (absent or "auto") — and
// refuses what it cannot give (URLs, streamed partial images, WebP)
// rather than answer with something else.
type imageAsk struct {
	n             int
	width, height int
	format        string // png or jpeg
	transparent   bool   // background transparent: no pixel drawn
}

// readImageAsk checks an image request's n, size, response_format,
// output_format, background and stream (the form's strings or the JSON's
// values).
func readImageAsk(n, size, responseFormat, outputFormat, background string, stream bool) (imageAsk, *openai.Error) {
	ask := imageAsk{n: 1, width: 1, height: 1, format: "png"}
	if n != "" {
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 || v > 10 {
			return ask, openai.InvalidRequest("n", "n must be between 1 and 10")
		}
		ask.n = v
	}
	if size != "" && size != "auto" {
		w, h, ok := strings.Cut(size, "x")
		ask.width, _ = strconv.Atoi(w)
		ask.height, _ = strconv.Atoi(h)
		if !ok || ask.width < 1 || ask.height < 1 || ask.width > maxImageSide || ask.height > maxImageSide {
			return ask, openai.InvalidRequest("size", "size must be auto or WIDTHxHEIGHT, each side 1 to %d, not %q", maxImageSide, size)
		}
	}
	switch {
	case responseFormat == "url":
		return ask, openai.InvalidRequest("response_format", "the sim returns images as b64_json only")
	case responseFormat != "" && responseFormat != "b64_json":
		return ask, openai.InvalidRequest("response_format", "response_format must be url or b64_json, not %q", responseFormat)
	case stream:
		return ask, openai.InvalidRequest("stream", "iop-sim does not stream images: it makes them whole")
	}
	switch outputFormat {
	case "", "png":
	case "jpeg":
		ask.format = "jpeg"
	default:
		return ask, openai.InvalidRequest("output_format", "iop-sim makes png or jpeg images, not %q", outputFormat)
	}
	switch background {
	case "", "auto", "opaque":
	case "transparent":
		if ask.format == "jpeg" {
			return ask, openai.InvalidRequest("background", "a transparent background needs output_format png: jpeg has no transparency")
		}
		ask.transparent = true
	default:
		return ask, openai.InvalidRequest("background", "background must be transparent, opaque or auto, not %q", background)
	}
	return ask, nil
}

// draw encodes the flat image the request asked for — grey, or nothing
// on a transparent background — as base64.
func (ask imageAsk) draw() string {
	bounds := image.Rect(0, 0, ask.width, ask.height)
	var img image.Image
	if ask.transparent {
		img = image.NewNRGBA(bounds) // every pixel transparent
	} else {
		grey := image.NewGray(bounds)
		for i := range grey.Pix {
			grey.Pix[i] = 0x80
		}
		img = grey
	}
	var b bytes.Buffer
	if ask.format == "jpeg" {
		_ = jpeg.Encode(&b, img, nil)
	} else {
		_ = png.Encode(&b, img)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// answer is the images response: n copies of the drawing, with the size
// and format they are in.
func (ask imageAsk) answer(revisedPrompt string) any {
	type image struct {
		B64JSON       string `json:"b64_json"`
		RevisedPrompt string `json:"revised_prompt,omitempty"`
	}
	out := struct {
		Created      int64   `json:"created"`
		Data         []image `json:"data"`
		Size         string  `json:"size"`
		OutputFormat string  `json:"output_format"`
	}{Created: time.Now().Unix(), Size: strconv.Itoa(ask.width) + "x" + strconv.Itoa(ask.height), OutputFormat: ask.format}
	drawn := ask.draw()
	for range ask.n {
		out.Data = append(out.Data, image{B64JSON: drawn, RevisedPrompt: revisedPrompt})
	}
	return out
}

// tunnelImages answers POST /v1/images/generations.
func (p *Provider) tunnelImages(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r struct {
		Prompt         string          `json:"prompt"`
		N              json.RawMessage `json:"n"`
		Size           string          `json:"size"`
		ResponseFormat string          `json:"response_format"`
		OutputFormat   string          `json:"output_format"`
		Background     string          `json:"background"`
		Stream         bool            `json:"stream"`
	}
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	if r.Prompt == "" {
		return respondError(emit, openai.InvalidRequest("prompt", "prompt is required"))
	}
	n := string(r.N)
	if n == "null" {
		n = ""
	}
	ask, e := readImageAsk(n, r.Size, r.ResponseFormat, r.OutputFormat, r.Background, r.Stream)
	if e != nil {
		return respondError(emit, e)
	}
	return respondJSON(emit, ask.answer(r.Prompt), nil)
}

// tunnelImageEdits answers /v1/images/edits (multipart) as generations
// are answered.
func (p *Provider) tunnelImageEdits(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	f, e := readForm(req)
	if e != nil {
		return respondError(emit, e)
	}
	if f.file == "" {
		return respondError(emit, openai.InvalidRequest("image", "image is required"))
	}
	if f.fields.Get("prompt") == "" {
		return respondError(emit, openai.InvalidRequest("prompt", "prompt is required"))
	}
	ask, e := readImageAsk(f.fields.Get("n"), f.fields.Get("size"), f.fields.Get("response_format"),
		f.fields.Get("output_format"), f.fields.Get("background"), f.fields.Get("stream") == "true")
	if e != nil {
		return respondError(emit, e)
	}
	return respondJSON(emit, ask.answer(""), nil)
}
