package wall

import (
	"encoding/json"
	"fmt"
	"net/http"
)

func (x *exchange) event(seq *int, typ string, fields map[string]any) bool {
	fields["type"] = typ
	fields["sequence_number"] = *seq
	*seq++
	b, _ := json.Marshal(fields)
	if _, err := fmt.Fprintf(x.rw, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		return false
	}
	x.rw.Flush()
	return true
}

func (x *exchange) response(status string, text string) map[string]any {
	out := []any{}
	if status != "in_progress" {
		out = append(out, map[string]any{"id": "msg_wall", "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}}})
	}
	r := map[string]any{"id": "resp_wall", "object": "response", "created_at": created, "status": status, "error": nil,
		"incomplete_details": nil, "instructions": nil, "model": x.model, "output": out, "parallel_tool_calls": true,
		"metadata": map[string]any{}, "tool_choice": "auto", "tools": []any{}, "temperature": 1.0, "top_p": 1.0}
	if status == "completed" {
		r["usage"] = map[string]any{"input_tokens": 9, "input_tokens_details": map[string]any{"cached_tokens": 0, "cache_write_tokens": 0},
			"output_tokens": len(x.w.Tokens), "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 9 + len(x.w.Tokens)}
	}
	return r
}

func (x *exchange) responses() {
	if !x.stream {
		if x.f.name == "stall-after" {
			x.stall()
			return
		}
		x.headers("application/json")
		b, _ := json.Marshal(x.response("completed", x.w.Text()))
		_, _ = x.rw.Write(b)
		return
	}
	x.headers("text/event-stream; charset=utf-8")
	x.rw.WriteHeader(http.StatusOK)
	x.rw.Flush()
	if x.f.name == "slow-ttft" && !x.sleep(x.f.d) {
		return
	}
	seq := 0
	item := map[string]any{"id": "msg_wall", "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}
	part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}
	x.event(&seq, "response.created", map[string]any{"response": x.response("in_progress", "")})
	x.event(&seq, "response.in_progress", map[string]any{"response": x.response("in_progress", "")})
	x.event(&seq, "response.output_item.added", map[string]any{"output_index": 0, "item": item})
	x.event(&seq, "response.content_part.added", map[string]any{"item_id": "msg_wall", "output_index": 0, "content_index": 0, "part": part})
	text := ""
	for i, tok := range x.w.Tokens {
		switch {
		case x.f.name == "stall-after" && i == x.f.n:
			x.stall()
			return
		case x.f.name == "cut-after" && i == x.f.n, x.f.name == "truncate-abort" && i == 2:
			x.abort()
		case x.f.name == "truncate-clean" && i == 2:
			return
		case x.f.name == "error-event" && i == 2:
			x.event(&seq, "error", map[string]any{"code": "server_is_overloaded", "message": "The server is overloaded.", "param": nil})
			return
		}
		if i > 0 && !x.sleep(x.w.TokenDelay) {
			return
		}
		text += tok
		x.event(&seq, "response.output_text.delta", map[string]any{"item_id": "msg_wall", "output_index": 0, "content_index": 0, "delta": tok, "logprobs": []any{}})
	}
	if x.f.name == "fail" {
		r := x.response("failed", text)
		r["error"] = map[string]any{"code": "server_error", "message": "The model failed to generate a response."}
		x.event(&seq, "response.failed", map[string]any{"response": r})
		return
	}
	x.event(&seq, "response.output_text.done", map[string]any{"item_id": "msg_wall", "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}})
	part["text"] = text
	x.event(&seq, "response.content_part.done", map[string]any{"item_id": "msg_wall", "output_index": 0, "content_index": 0, "part": part})
	item["status"], item["content"] = "completed", []any{part}
	x.event(&seq, "response.output_item.done", map[string]any{"output_index": 0, "item": item})
	x.event(&seq, "response.completed", map[string]any{"response": x.response("completed", text)})
}
