package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// form reads a multipart request's fields, and the size and name of its
// file part (the bytes themselves are only counted).
type form struct {
	fields   map[string]string
	file     string
	fileSize int
}

func readForm(req *execution.ProviderTunnelRequest) (*form, *openai.Error) {
	ct := http.Header(req.Header).Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, openai.InvalidRequest("", "The request must be multipart/form-data (got %q).", ct)
	}
	f := &form{fields: map[string]string{}}
	r := multipart.NewReader(bytes.NewReader(req.Body), params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return nil, openai.InvalidRequest("", "The multipart body could not be read: %v.", err)
		}
		if part.FileName() != "" {
			n, _ := io.Copy(io.Discard, part)
			f.file, f.fileSize = part.FileName(), int(n)
			continue
		}
		v, _ := io.ReadAll(io.LimitReader(part, 1<<16))
		f.fields[part.FormName()] = string(v)
	}
}

// tunnelTranscription answers /v1/audio/transcriptions and
// /v1/audio/translations: a sentence naming the audio it was given, as
// json (default), text, verbose_json, or — with stream=true — the
// transcript.text.delta / transcript.text.done events.
func (p *Provider) tunnelTranscription(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	f, e := readForm(req)
	if e != nil {
		return respondError(emit, e)
	}
	if f.file == "" {
		return respondError(emit, openai.InvalidRequest("file", "file is required"))
	}
	text := fmt.Sprintf("iop-sim heard %d bytes of audio in %s.", f.fileSize, f.file)
	if f.fields["stream"] == "true" {
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: http.StatusOK, Header: header("text/event-stream")})
		for _, tok := range tokenize(text) {
			b, _ := json.Marshal(map[string]string{"type": "transcript.text.delta", "delta": tok})
			emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: append(append([]byte("data: "), b...), '\n', '\n')})
		}
		b, _ := json.Marshal(map[string]string{"type": "transcript.text.done", "text": text})
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: append(append([]byte("data: "), b...), '\n', '\n')})
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
		return nil
	}
	switch format := f.fields["response_format"]; format {
	case "", "json":
		return respondJSON(emit, map[string]string{"text": text}, nil)
	case "verbose_json":
		return respondJSON(emit, map[string]any{"task": "transcribe", "language": "english", "duration": 0.1, "text": text}, nil)
	case "text":
		return respondBytes(emit, "text/plain; charset=utf-8", []byte(text+"\n"))
	default:
		return respondError(emit, openai.InvalidRequest("response_format", "iop-sim answers json, verbose_json or text, not %q", format))
	}
}

// tunnelSpeech answers /v1/audio/speech with a tenth of a second of
// silence: a WAV file (the default here) or raw PCM — the formats the sim
// can make; others are refused rather than mislabelled.
func (p *Provider) tunnelSpeech(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r struct {
		Input          string `json:"input"`
		Voice          string `json:"voice"`
		ResponseFormat string `json:"response_format"`
	}
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	switch {
	case r.Input == "":
		return respondError(emit, openai.InvalidRequest("input", "input is required"))
	case r.ResponseFormat == "pcm":
		return respondBytes(emit, "audio/pcm", make([]byte, 2400))
	case r.ResponseFormat == "" || r.ResponseFormat == "wav":
		return respondBytes(emit, "audio/wav", silentWAV(24000, 2400))
	}
	return respondError(emit, openai.InvalidRequest("response_format", "iop-sim makes wav or pcm audio, not %q", r.ResponseFormat))
}

// silentWAV is a mono 16-bit PCM WAV file of n bytes of silence.
func silentWAV(rate, n int) []byte {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(36 + n))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1)) // PCM
	w(uint16(1)) // mono
	w(uint32(rate))
	w(uint32(rate * 2))
	w(uint16(2))
	w(uint16(16))
	b.WriteString("data")
	w(uint32(n))
	b.Write(make([]byte, n))
	return b.Bytes()
}

// tunnelImageEdits answers /v1/images/edits (multipart) as generations
// are answered: n copies of the 1×1 PNG.
func (p *Provider) tunnelImageEdits(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	f, e := readForm(req)
	if e != nil {
		return respondError(emit, e)
	}
	if f.file == "" {
		return respondError(emit, openai.InvalidRequest("image", "image is required"))
	}
	if f.fields["prompt"] == "" {
		return respondError(emit, openai.InvalidRequest("prompt", "prompt is required"))
	}
	return respondJSON(emit, map[string]any{"created": time.Now().Unix(), "data": []map[string]string{{"b64_json": simImagePNG}}}, nil)
}

// respondBytes answers 200 with body as contentType, in chunks as an
// upstream would send a file.
func respondBytes(emit *execution.FrameEmitter, contentType string, body []byte) error {
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeResponseStart, Status: http.StatusOK, Header: header(contentType)})
	for len(body) > 0 {
		n := min(len(body), 1024)
		emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeBody, Body: body[:n]})
		body = body[n:]
	}
	emit.Emit(execution.ProviderTunnelFrame{Type: execution.FrameTypeEnd})
	return nil
}
