package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	stdpng "image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/e2e"
	"github.com/iopgw/iop/nodeagent"
)

// named is a file part with a name, as the SDK sends a file.
type named struct {
	io.Reader
	name string
}

func (n named) Filename() string    { return n.name }
func (n named) ContentType() string { return "application/octet-stream" }

// TestMediaWithTheOpenAISDK drives the multipart and binary endpoints
// through iop with the official openai-go SDK: a transcription (JSON,
// text, and verbose JSON timed from the WAV's header), a translation,
// speech (WAV bytes streamed through), and an image edit of the number and
// size asked; a model whose providers do not declare the audio surface is a
// 404 naming it, and a request that is not multipart a 400.
func TestMediaWithTheOpenAISDK(t *testing.T) {
	c := e2e.Start(t, e2e.Options{}, func(*e2e.Cluster) []e2e.NodeSpec {
		chatOnly := e2e.Sim("chat-only", nodeagent.SimConfig{})
		chatOnly.Models, chatOnly.Surfaces = []string{"chat-only"}, []string{"chat"}
		return []e2e.NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{e2e.Sim("sim", nodeagent.SimConfig{}), chatOnly}}}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	audio := bytes.Repeat([]byte{0}, 3000)

	tr, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(audio), "a.wav"}, Model: "iop-sim"})
	if err != nil || tr.Text != "iop-sim heard 3000 bytes of audio in a.wav." {
		t.Fatalf("transcription: %+v %v", tr, err)
	}
	// A text transcription: the SDK's typed result is JSON only, so the
	// raw answer is read (the SDK then says it cannot decode text/plain).
	var raw *http.Response
	_, _ = client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(audio), "a.wav"}, Model: "iop-sim",
		ResponseFormat: openai.AudioResponseFormatText}, option.WithResponseInto(&raw))
	if raw == nil || raw.StatusCode != 200 || !strings.HasPrefix(raw.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("text transcription: %v", raw)
	}
	//lint:ignore SA1019 the SDK deprecates its translations call, but servers (and iop) still serve the endpoint
	tl, err := client.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{File: named{bytes.NewReader(audio), "b.mp3"}, Model: "iop-sim"})
	if err != nil || !strings.Contains(tl.Text, "b.mp3") {
		t.Fatalf("translation: %+v %v", tl, err)
	}

	sp, err := client.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "iop-sim", Input: "hello",
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, ResponseFormat: openai.AudioSpeechNewParamsResponseFormatWAV})
	if err != nil {
		t.Fatal(err)
	}
	wav, _ := io.ReadAll(sp.Body)
	sp.Body.Close()
	if sp.Header.Get("Content-Type") != "audio/wav" || len(wav) != 44+2400 || string(wav[:4]) != "RIFF" || string(wav[8:12]) != "WAVE" {
		t.Fatalf("speech: %s, %d bytes", sp.Header.Get("Content-Type"), len(wav))
	}

	// verbose_json: the duration read from the WAV header (the speech
	// above is 2,400 bytes at 48,000 a second), one segment spanning it.
	vt, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(wav), "hello.wav"}, Model: "iop-sim",
		ResponseFormat: openai.AudioResponseFormatVerboseJSON, TimestampGranularities: []string{"segment"}})
	if v := vt.AsTranscriptionVerbose(); err != nil || v.Duration != 0.05 || len(v.Segments) != 1 || v.Segments[0].End != 0.05 {
		t.Fatalf("verbose transcription: %+v %v", v, err)
	}
	_, err = client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(wav), "hello.wav"}, Model: "iop-sim",
		ResponseFormat: openai.AudioResponseFormatVerboseJSON, TimestampGranularities: []string{"word"}})
	if apiErr := (*openai.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "timestamp_granularities" {
		t.Fatalf("word timestamps the sim cannot give: %v", err)
	}

	img, err := client.Images.Edit(ctx, openai.ImageEditParams{Image: openai.ImageEditParamsImageUnion{OfFile: named{bytes.NewReader([]byte("PNG")), "in.png"}},
		Prompt: "make it blue", Model: "iop-sim", N: openai.Int(2), Size: openai.ImageEditParamsSize("256x256")})
	if err != nil || len(img.Data) != 2 {
		t.Fatalf("image edit: %+v %v", img, err)
	}
	if png, err := base64.StdEncoding.DecodeString(img.Data[1].B64JSON); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("image edit answer is not a PNG: %v", err)
	} else if cfg, err := stdpng.DecodeConfig(bytes.NewReader(png)); err != nil || cfg.Width != 256 || cfg.Height != 256 {
		t.Fatalf("image edit answer is not the size asked: %+v %v", cfg, err)
	}

	_, err = client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(audio), "a.wav"}, Model: "chat-only"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_supported" || !strings.Contains(apiErr.Message, "audio surface") {
		t.Fatalf("a model without the audio surface: %v", err)
	}
	resp, err := http.Post(c.URL+"/v1/audio/transcriptions", "application/json", strings.NewReader(`{"model":"iop-sim"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "multipart/form-data") {
		t.Fatalf("a JSON transcription request: %d %s", resp.StatusCode, body)
	}
}

// TestMediaAliasAndFallbackRewriteTheForm: a multipart request's model is
// its form field, and the upstream gets the model it serves there as it
// does in a JSON body — through an alias (its target's name) and after a
// fallback (the fallback's name) — with the audio file and every other
// field as the SDK sent them. The upstream is a plain HTTP server reading
// the form with the standard library, as a real one does.
func TestMediaAliasAndFallbackRewriteTheForm(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(f)
		model := r.FormValue("model")
		w.Header().Set("Content-Type", "application/json")
		if model != "whisper-large" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"model `+model+` is overloaded","type":"server_error"}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"text":"%s heard %d bytes of %s, language %s"}`, model, len(data), h.Filename, r.FormValue("language"))
	}))
	defer up.Close()
	c := e2e.Start(t, e2e.Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{
			{Name: "whisper", Targets: []pool.ModelTarget{{Model: "whisper-large"}}},
			{Name: "whisper-busy", Fallbacks: []string{"whisper-large"}, Retry: gateway.RetryConfig{Retries: new(0)}},
		}
	}}, func(*e2e.Cluster) []e2e.NodeSpec {
		p := nodeagent.ProviderConfig{ID: "up", Adapter: "openai", BaseURL: up.URL + "/v1", Models: []string{"whisper-large", "whisper-busy"},
			Surfaces: []string{"audio"}, Capacity: 8}
		return []e2e.NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{p}}}
	})
	client := openai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	audio := bytes.Repeat([]byte("--\r\nmodel\r\n"), 300)
	for _, model := range []string{"whisper", "whisper-busy", "whisper-large"} {
		tr, err := client.Audio.Transcriptions.New(t.Context(), openai.AudioTranscriptionNewParams{File: named{bytes.NewReader(audio), "a.wav"},
			Model: model, Language: openai.String("de")})
		if want := "whisper-large heard 3300 bytes of a.wav, language de"; err != nil || tr.Text != want {
			t.Fatalf("%s: %+v %v, want %q", model, tr, err, want)
		}
	}
}
