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
	"net/url"
	"slices"
	"strings"

	"github.com/iopgw/iop/codec/openai"
	"github.com/iopgw/iop/execution"
)

// form reads a multipart request's fields, and the name, size and first
// bytes of its file part (the rest is only counted).
type form struct {
	fields   url.Values
	file     string
	fileSize int
	fileHead []byte // up to fileHeadSize bytes
}

// fileHeadSize is how much of a file part the sim keeps: enough for an
// audio file's header.
const fileHeadSize = 4096

func readForm(req *execution.ProviderTunnelRequest) (*form, *openai.Error) {
	ct := http.Header(req.Header).Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, openai.InvalidRequest("", "The request must be multipart/form-data (got %q).", ct)
	}
	f := &form{fields: url.Values{}}
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
			head := make([]byte, fileHeadSize)
			k, _ := io.ReadFull(part, head)
			rest, _ := io.Copy(io.Discard, part)
			f.file, f.fileSize, f.fileHead = part.FileName(), k+int(rest), head[:k]
			continue
		}
		v, _ := io.ReadAll(io.LimitReader(part, 1<<16))
		f.fields.Add(part.FormName(), string(v))
	}
}

// wavSeconds is how long a WAV file's audio lasts, from its header (in
// head, the file's first bytes): the data chunk's length over the format's
// bytes a second. ok is false when head holds no such header.
func wavSeconds(head []byte, size int) (seconds float64, ok bool) {
	if len(head) < 12 || string(head[:4]) != "RIFF" || string(head[8:12]) != "WAVE" {
		return 0, false
	}
	byteRate := 0
	for off := 12; off+8 <= len(head); {
		id, n, body := string(head[off:off+4]), int(binary.LittleEndian.Uint32(head[off+4:])), off+8
		switch id {
		case "fmt ":
			if body+12 > len(head) {
				return 0, false
			}
			byteRate = int(binary.LittleEndian.Uint32(head[body+8:]))
		case "data":
			if byteRate == 0 {
				return 0, false
			}
			// A recorder that could not seek back writes a length it
			// did not know yet: the file's end bounds it.
			return float64(min(n, size-body)) / float64(byteRate), true
		}
		off = body + n + n&1
	}
	return 0, false
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
	if f.fields.Get("stream") == "true" {
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
	switch format := f.fields.Get("response_format"); format {
	case "", "json":
		return respondJSON(emit, map[string]string{"text": text}, nil)
	case "verbose_json":
		return verboseTranscription(req, f, text, emit)
	case "text":
		return respondBytes(emit, "text/plain; charset=utf-8", []byte(text+"\n"))
	default:
		return respondError(emit, openai.InvalidRequest("response_format", "iop-sim answers json, verbose_json or text, not %q", format))
	}
}

// verboseTranscription answers response_format verbose_json: the text as
// one segment lasting the whole audio, which the sim can time only when it
// is WAV; it times no words, and refuses a request for their timing.
func verboseTranscription(req *execution.ProviderTunnelRequest, f *form, text string, emit *execution.FrameEmitter) error {
	if slices.Contains(f.fields["timestamp_granularities[]"], "word") || slices.Contains(f.fields["timestamp_granularities"], "word") {
		return respondError(emit, openai.InvalidRequest("timestamp_granularities", "iop-sim does not time words: ask for segment timestamps only"))
	}
	seconds, ok := wavSeconds(f.fileHead, f.fileSize)
	if !ok {
		return respondError(emit, openai.InvalidRequest("response_format", "iop-sim times WAV audio only, and %s is not WAV: ask for json or text", f.file))
	}
	task := "transcribe"
	if path, _, _ := strings.Cut(req.Path, "?"); strings.HasSuffix(path, "/translations") {
		task = "translate"
	}
	segment := map[string]any{"id": 0, "seek": 0, "start": 0, "end": seconds, "text": text}
	return respondJSON(emit, map[string]any{"task": task, "language": "english", "duration": seconds, "text": text,
		"segments": []any{segment}}, nil)
}

// tunnelSpeech answers /v1/audio/speech with 50 ms of
// silence: a WAV file (the default here) or raw PCM — the formats the sim
// can make; others are refused rather than mislabelled.
func (p *Provider) tunnelSpeech(req *execution.ProviderTunnelRequest, emit *execution.FrameEmitter) error {
	var r struct {
		Input          string          `json:"input"`
		Voice          json.RawMessage `json:"voice"` // a name, or a custom voice's {"id": ...}
		ResponseFormat string          `json:"response_format"`
		StreamFormat   string          `json:"stream_format"`
		Speed          *float64        `json:"speed"`
	}
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return respondError(emit, openai.InvalidRequest("", "We could not parse the JSON body of your request: %v", err))
	}
	switch {
	case r.Input == "":
		return respondError(emit, openai.InvalidRequest("input", "input is required"))
	case len(r.Voice) == 0 || string(r.Voice) == "null" || string(r.Voice) == `""`:
		return respondError(emit, openai.InvalidRequest("voice", "voice is required"))
	case r.Speed != nil && (*r.Speed < 0.25 || *r.Speed > 4):
		return respondError(emit, openai.InvalidRequest("speed", "speed must be between 0.25 and 4.0"))
	case r.StreamFormat != "" && r.StreamFormat != "audio":
		// Not answered with audio bytes a client reading events cannot use.
		return respondError(emit, openai.InvalidRequest("stream_format", "iop-sim answers speech as audio bytes only, not %q events", r.StreamFormat))
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
