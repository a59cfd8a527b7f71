package wall

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

func (x *exchange) ollamaJSON(status int, v any) {
	x.rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	x.rw.WriteHeader(status)
	b, _ := json.Marshal(v)
	_, _ = x.rw.Write(b)
}

func (x *exchange) ollamaInfo() {
	switch x.r.URL.Path {
	case "/":
		x.rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(x.rw, "Ollama is running")
	case "/api/version":
		x.ollamaJSON(http.StatusOK, map[string]any{"version": "0.33.0"})
	case "/api/tags", "/api/ps":
		models := []any{}
		for _, m := range x.w.Models {
			models = append(models, map[string]any{"name": m, "model": m, "modified_at": "2026-01-01T00:00:00Z", "size": 2019393189,
				"digest": "a80c4f17acd5", "details": map[string]any{"format": "gguf", "family": "llama", "parameter_size": "3.2B", "quantization_level": "Q4_K_M"}})
		}
		x.ollamaJSON(http.StatusOK, map[string]any{"models": models})
	case "/api/show":
		if x.model == "missing" {
			x.ollamaJSON(http.StatusNotFound, map[string]any{"error": "model 'missing' not found"})
			return
		}
		x.ollamaJSON(http.StatusOK, map[string]any{"modelfile": "FROM wall", "parameters": "", "template": "{{ .Prompt }}",
			"details": map[string]any{"format": "gguf", "family": "llama"}, "model_info": map[string]any{}, "capabilities": []string{"completion", "tools"}})
	}
}

func (x *exchange) ollamaLine(v any) bool {
	b, _ := json.Marshal(v)
	if _, err := x.rw.Write(append(b, '\n')); err != nil {
		return false
	}
	x.rw.Flush()
	return true
}

func (x *exchange) ollamaStream(generate bool) {
	if x.model == "missing" {
		x.ollamaJSON(http.StatusNotFound, map[string]any{"error": "model 'missing' not found"})
		return
	}
	var req struct {
		Stream *bool `json:"stream"`
	}
	_ = json.Unmarshal(x.a.Body, &req)
	stream := req.Stream == nil || *req.Stream
	at := time.Now().UTC().Format(time.RFC3339Nano)
	piece := func(text string, done bool) map[string]any {
		m := map[string]any{"model": x.model, "created_at": at, "done": done}
		if generate {
			m["response"] = text
		} else {
			m["message"] = map[string]any{"role": "assistant", "content": text}
		}
		return m
	}
	final := piece("", true)
	for k, v := range map[string]any{"done_reason": "stop", "total_duration": 5000000, "load_duration": 1000, "prompt_eval_count": 9,
		"prompt_eval_duration": 1000, "eval_count": len(x.w.Tokens), "eval_duration": 4000000} {
		final[k] = v
	}
	if !stream {
		if generate {
			final["response"] = x.w.Text()
		} else {
			final["message"] = map[string]any{"role": "assistant", "content": x.w.Text()}
		}
		x.ollamaJSON(http.StatusOK, final)
		return
	}
	x.rw.Header().Set("Content-Type", "application/x-ndjson")
	x.rw.WriteHeader(http.StatusOK)
	for i, tok := range x.w.Tokens {
		switch {
		case x.f.name == "stall-after" && i == x.f.n:
			x.stall()
			return
		case x.f.name == "cut-after" && i == x.f.n:
			x.abort()
		case x.f.name == "midstream-error" && i == 2:
			x.ollamaLine(map[string]any{"error": "an error was encountered while running the model"})
			return
		case x.f.name == "truncate-clean" && i == 2:
			return
		}
		if i > 0 && !x.sleep(x.w.TokenDelay) {
			return
		}
		if !x.ollamaLine(piece(tok, false)) {
			return
		}
	}
	x.ollamaLine(final)
}
