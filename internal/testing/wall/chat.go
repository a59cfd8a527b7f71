package wall

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

const created = 1700000000

func (x *exchange) chunk(delta map[string]any, finish any) []byte {
	c := map[string]any{
		"id": "chatcmpl-wall", "object": "chat.completion.chunk", "created": created, "model": x.model,
		"system_fingerprint": "fp_wall",
		"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	}
	if x.usage {
		c["usage"] = nil
	}
	b, _ := json.Marshal(c)
	return b
}

func (x *exchange) usageChunk() []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-wall", "object": "chat.completion.chunk", "created": created, "model": x.model, "system_fingerprint": "fp_wall",
		"choices": []any{}, "usage": x.usageObj(),
	})
	return b
}

func (x *exchange) usageObj() map[string]any {
	out := len(x.w.Tokens)
	return map[string]any{"prompt_tokens": 9, "completion_tokens": out, "total_tokens": 9 + out,
		"prompt_tokens_details": map[string]any{"cached_tokens": 0}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

func (x *exchange) data(b []byte) bool {
	if _, err := fmt.Fprintf(x.rw, "data: %s\n\n", b); err != nil {
		return false
	}
	x.rw.Flush()
	return true
}

func (x *exchange) chat() {
	if !x.stream {
		x.chatJSON()
		return
	}
	x.headers("text/event-stream; charset=utf-8")
	x.rw.WriteHeader(http.StatusOK)
	x.rw.Flush()
	switch x.f.name {
	case "slow-ttft":
		if !x.sleep(x.f.d) {
			return
		}
	case "heartbeat-only":
		for x.sleep(100 * time.Millisecond) {
			_, _ = io.WriteString(x.rw, ": ping\n\n")
			x.rw.Flush()
		}
		return
	case "reasoning-only":
		for end := time.Now().Add(x.f.d); time.Now().Before(end); {
			if !x.data(x.chunk(map[string]any{"reasoning_content": "hmm"}, nil)) || !x.sleep(50*time.Millisecond) {
				return
			}
		}
	case "tool-call-then-stall", "tools":
		x.toolCalls()
		return
	case "flood":
		// Big chunks until the client goes away (slow-reader tests).
		big := strings.Repeat("x", 64<<10)
		for i := 0; i < 4096 && x.data(x.chunk(map[string]any{"content": big}, nil)); i++ {
		}
		return
	case "huge-line":
		x.data(x.chunk(map[string]any{"role": "assistant", "content": strings.Repeat("x", 2<<20)}, nil))
		x.data(x.chunk(map[string]any{}, "stop"))
		x.data([]byte("[DONE]"))
		return
	}
	x.data(x.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if !x.chatTokens() {
		return
	}
	switch x.f.name {
	case "truncate-clean":
		return
	case "midstream-error":
		return
	}
	x.data(x.chunk(map[string]any{}, "stop"))
	if x.usage {
		x.data(x.usageChunk())
	}
	if x.f.name == "no-done" {
		return
	}
	x.data([]byte("[DONE]"))
}

// chatTokens streams the canonical tokens with the fault's interruptions.
// It reports whether the stream should go on to its normal end.
func (x *exchange) chatTokens() bool {
	delay := x.w.TokenDelay
	switch x.f.name {
	case "slow":
		delay = 300 * time.Millisecond
	case "drip":
		delay = x.f.d
	}
	for i, tok := range x.w.Tokens {
		switch {
		case x.f.name == "stall-after" && i == x.f.n:
			x.stall()
			return false
		case (x.f.name == "cut-after" && i == x.f.n) || (x.f.name == "truncate-abort" && i == 2):
			x.abort()
		case x.f.name == "midstream-error" && i == 2:
			x.data([]byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"server_error"}}`))
			return false
		case x.f.name == "malformed-at" && i+1 == x.f.n:
			x.data([]byte(`{"id":"chatcmpl-wall","choices":[{"delta":{"content":"`))
			continue
		}
		if i > 0 && !x.sleep(delay) {
			return false
		}
		if x.f.name == "ping" {
			_, _ = io.WriteString(x.rw, ": ping\n\n")
		}
		if !x.data(x.chunk(map[string]any{"content": tok}, nil)) {
			return false
		}
	}
	return true
}

func (x *exchange) toolCalls() {
	x.data(x.chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"index": 0, "id": "call_wall", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": ""}}}}, nil))
	if x.f.name == "tool-call-then-stall" {
		x.data(x.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"city":`}}}}, nil))
		x.stall()
		return
	}
	for _, frag := range []string{`{"city":`, `"Paris"}`} {
		x.data(x.chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": frag}}}}, nil))
	}
	x.data(x.chunk(map[string]any{}, "tool_calls"))
	if x.usage {
		x.data(x.usageChunk())
	}
	x.data([]byte("[DONE]"))
}

func (x *exchange) chatJSON() {
	switch x.f.name {
	case "stall-after", "slow-ttft":
		if x.f.name == "stall-after" {
			x.stall()
			return
		}
		if !x.sleep(x.f.d) {
			return
		}
	case "cut-after", "truncate-abort":
		x.headers("application/json")
		x.rw.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(x.rw, `{"id":"chatcmpl-wall","object":"chat.`)
		x.rw.Flush()
		x.abort()
	}
	x.headers("application/json")
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-wall", "object": "chat.completion", "created": created, "model": x.model, "system_fingerprint": "fp_wall",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": x.w.Text(), "refusal": nil, "annotations": []any{}},
			"logprobs": nil, "finish_reason": "stop"}},
		"usage": x.usageObj(), "service_tier": "default",
	})
	_, _ = x.rw.Write(b)
}

func (x *exchange) models() {
	x.headers("application/json")
	data := []any{}
	for _, m := range x.w.Models {
		data = append(data, map[string]any{"id": m, "object": "model", "created": created, "owned_by": "wall"})
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	_, _ = x.rw.Write(b)
}

func (x *exchange) embeddings() {
	x.headers("application/json")
	b, _ := json.Marshal(map[string]any{"object": "list", "model": x.model,
		"data":  []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.1, -0.2, 0.3}}},
		"usage": map[string]any{"prompt_tokens": 3, "total_tokens": 3}})
	_, _ = x.rw.Write(b)
}
