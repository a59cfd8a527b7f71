package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

// tunnelForm posts a multipart form (fields, and a file part named file
// when content is not nil) to the sim's path.
func tunnelForm(t *testing.T, path string, fields map[string][]string, file string, content []byte) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for k, vs := range fields {
		for _, v := range vs {
			_ = w.WriteField(k, v)
		}
	}
	if content != nil {
		fw, _ := w.CreateFormFile("file", file)
		_, _ = fw.Write(content)
	}
	_ = w.Close()
	return tunnelRequest(t, New(Config{}), &execution.ProviderTunnelRequest{Method: http.MethodPost, Path: path, Body: body.Bytes(),
		Header: map[string][]string{"Content-Type": {w.FormDataContentType()}}})
}

// TestTunnelVerboseTranscription: verbose_json times a WAV file's audio
// from its header — duration and one segment spanning it — names the task
// (translate for translations), and is refused for audio the sim cannot
// time and for word timestamps, rather than answered with a made-up
// duration or without the words asked for.
func TestTunnelVerboseTranscription(t *testing.T) {
	wav := silentWAV(24000, 48000) // one second: 48,000 bytes at 2 bytes a sample
	for _, tc := range []struct {
		path, file string
		content    []byte
		grains     []string
		status     int
		task       string
		param      string
	}{
		{"/v1/audio/transcriptions", "a.wav", wav, nil, 200, "transcribe", ""},
		{"/v1/audio/transcriptions", "a.wav", wav, []string{"segment"}, 200, "transcribe", ""},
		{"/v1/audio/translations", "a.wav", wav, nil, 200, "translate", ""},
		{"/v1/audio/transcriptions", "a.wav", wav, []string{"word", "segment"}, 400, "", "timestamp_granularities"},
		{"/v1/audio/transcriptions", "a.mp3", bytes.Repeat([]byte{0xff}, 3000), nil, 400, "", "response_format"},
	} {
		status, body := tunnelForm(t, tc.path, map[string][]string{"model": {"m"}, "response_format": {"verbose_json"},
			"timestamp_granularities[]": tc.grains}, tc.file, tc.content)
		var v struct {
			Task     string
			Duration float64
			Segments []struct {
				Start, End float64
				Text       string
			}
			Error struct{ Param string }
		}
		if err := json.Unmarshal(body, &v); err != nil || status != tc.status || v.Task != tc.task || v.Error.Param != tc.param {
			t.Fatalf("%s %s %v: %d %s", tc.path, tc.file, tc.grains, status, body)
		}
		if status == 200 && (v.Duration != 1 || len(v.Segments) != 1 || v.Segments[0].End != 1 || !strings.Contains(v.Segments[0].Text, "48044 bytes")) {
			t.Fatalf("%s: %s", tc.path, body)
		}
	}
}

// TestWAVSeconds: a header with other chunks before the data, and one
// whose data length was never filled in (bounded by the file's size).
func TestWAVSeconds(t *testing.T) {
	wav := silentWAV(8000, 16000) // 16,000 bytes at 16,000 bytes a second
	if s, ok := wavSeconds(wav, len(wav)); !ok || s != 1 {
		t.Fatalf("plain: %v %v", s, ok)
	}
	list := append(append([]byte{}, wav[:36]...), "LIST\x05\x00\x00\x00abcde\x00"...) // odd length, padded
	withList := append(list, wav[36:]...)
	if s, ok := wavSeconds(withList, len(withList)); !ok || s != 1 {
		t.Fatalf("with a LIST chunk: %v %v", s, ok)
	}
	unknown := append([]byte{}, wav...)
	copy(unknown[40:44], "\xff\xff\xff\xff")
	if s, ok := wavSeconds(unknown[:44+8000], 44+8000); !ok || s != 0.5 {
		t.Fatalf("unknown length: %v %v", s, ok)
	}
	for _, head := range [][]byte{nil, []byte("RIFF"), wav[:20], []byte("ID3\x03 not a wav file")} {
		if _, ok := wavSeconds(head, 1000); ok {
			t.Fatalf("%q timed", head)
		}
	}
}

// TestTunnelImagesAsAsked: generations and edits give n images of the
// size and format asked (a flat image; 1×1 when the size is left to the
// sim), and refuse what the sim cannot give — URLs, streaming, WebP, a
// size it cannot read — rather than answer with something else.
func TestTunnelImagesAsAsked(t *testing.T) {
	check := func(name string, status int, body []byte, n, w, h int, format string) {
		t.Helper()
		var v struct {
			Data []struct {
				B64JSON string `json:"b64_json"`
			}
			Size string
		}
		if err := json.Unmarshal(body, &v); err != nil || status != 200 || len(v.Data) != n {
			t.Fatalf("%s: %d %s", name, status, body)
		}
		raw, _ := base64.StdEncoding.DecodeString(v.Data[0].B64JSON)
		cfg, got, err := image.DecodeConfig(bytes.NewReader(raw))
		if err != nil || got != format || cfg.Width != w || cfg.Height != h {
			t.Fatalf("%s: %v %s %dx%d (size %q)", name, err, got, cfg.Width, cfg.Height, v.Size)
		}
	}
	p := New(Config{})
	status, body := tunnel(t, p, "/v1/images/generations", `{"prompt":"a square","n":2,"size":"256x128"}`)
	check("generation", status, body, 2, 256, 128, "png")
	status, body = tunnel(t, p, "/v1/images/generations", `{"prompt":"a square","size":"auto","output_format":"jpeg"}`)
	check("jpeg generation", status, body, 1, 1, 1, "jpeg")
	status, body = tunnel(t, p, "/v1/images/generations", `{"prompt":"a square","size":"4x4","background":"transparent"}`)
	check("transparent generation", status, body, 1, 4, 4, "png")
	var transparent struct {
		Data []struct {
			B64JSON string `json:"b64_json"`
		}
	}
	_ = json.Unmarshal(body, &transparent)
	raw, _ := base64.StdEncoding.DecodeString(transparent.Data[0].B64JSON)
	img, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("transparent: %v", err)
	}
	if _, _, _, a := img.At(2, 2).RGBA(); a != 0 {
		t.Fatalf("transparent: alpha %d", a)
	}
	status, body = tunnelForm(t, "/v1/images/edits", map[string][]string{"prompt": {"blue"}, "n": {"3"}, "size": {"64x64"}}, "in.png", []byte("PNG"))
	check("edit", status, body, 3, 64, 64, "png")

	for _, tc := range []struct{ body, param string }{
		{`{"prompt":"x","response_format":"url"}`, "response_format"},
		{`{"prompt":"x","stream":true}`, "stream"},
		{`{"prompt":"x","output_format":"webp"}`, "output_format"},
		{`{"prompt":"x","size":"huge"}`, "size"},
		{`{"prompt":"x","size":"8192x8192"}`, "size"},
		{`{"prompt":"x","n":11}`, "n"},
		{`{"prompt":"x","background":"transparent","output_format":"jpeg"}`, "background"},
		{`{"prompt":"x","background":"pink"}`, "background"},
	} {
		status, body := tunnel(t, p, "/v1/images/generations", tc.body)
		if v := decodeAnswer(t, body); status != 400 || v.Error.Param != tc.param {
			t.Fatalf("%s: %d %s", tc.body, status, body)
		}
	}
	status, body = tunnelForm(t, "/v1/images/edits", map[string][]string{"prompt": {"blue"}, "response_format": {"url"}}, "in.png", []byte("PNG"))
	if v := decodeAnswer(t, body); status != 400 || v.Error.Param != "response_format" {
		t.Fatalf("edit as url: %d %s", status, body)
	}
}

// TestTunnelSpeechRefusals: what OpenAI refuses (no voice, a speed out of
// range) and what the sim cannot give (events instead of audio bytes, an
// encoding it cannot make) are 400s naming the field; a custom voice
// ({"id": ...}) is a voice.
func TestTunnelSpeechRefusals(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct{ body, param string }{
		{`{"input":"hi"}`, "voice"},
		{`{"input":"hi","voice":""}`, "voice"},
		{`{"input":"hi","voice":"alloy","speed":5}`, "speed"},
		{`{"input":"hi","voice":"alloy","stream_format":"sse"}`, "stream_format"},
		{`{"input":"hi","voice":"alloy","response_format":"mp3"}`, "response_format"},
	} {
		status, body := tunnel(t, p, "/v1/audio/speech", tc.body)
		if v := decodeAnswer(t, body); status != 400 || v.Error.Param != tc.param {
			t.Fatalf("%s: %d %s", tc.body, status, body)
		}
	}
	for _, body := range []string{`{"input":"hi","voice":{"id":"voice_123"},"speed":1.5,"stream_format":"audio"}`, `{"input":"hi","voice":"alloy"}`} {
		if status, wav := tunnel(t, p, "/v1/audio/speech", body); status != 200 || string(wav[:4]) != "RIFF" {
			t.Fatalf("%s: %d %q", body, status, wav)
		}
	}
}
