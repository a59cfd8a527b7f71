package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// upstreamConfig shapes the fake upstream's answers.
type upstreamConfig struct {
	chunks int           // content chunks per stream
	size   int           // bytes of content per chunk
	delay  time.Duration // between chunks
}

// runUpstream serves a fast fake OpenAI API: fixed JSON with usage, SSE with
// role chunk, N content chunks, finish chunk, usage chunk and [DONE], and
// /v1/models. Model "hold-<seconds>" sends one chunk and holds the stream
// open (for memory per open stream).
func runUpstream(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	var c upstreamConfig
	fs.IntVar(&c.chunks, "chunks", 32, "content chunks per stream")
	fs.IntVar(&c.size, "size", 16, "bytes per chunk")
	fs.DurationVar(&c.delay, "delay", 0, "delay between chunks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: c.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func (c upstreamConfig) handler() http.Handler {
	content := strings.Repeat("x", c.size)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"bench","object":"model","created":1700000000,"owned_by":"bench"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":%d,"total_tokens":%d}}`,
				req.Model, content, c.chunks, c.chunks+8)
			return
		}
		c.stream(w, r, req.Model, content)
	})
	return mux
}

func (c upstreamConfig) stream(w http.ResponseWriter, r *http.Request, model, content string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	rc := http.NewResponseController(w)
	chunk := func(delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = strconv.Quote(finish)
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}],\"usage\":null}\n\n", model, delta, fin)
		_ = rc.Flush()
	}
	chunk(`{"role":"assistant","content":""}`, "")
	if rest, ok := strings.CutPrefix(model, "hold-"); ok {
		chunk(`{"content":"`+content+`"}`, "")
		digits, _, _ := strings.Cut(rest, "-")
		d, _ := strconv.Atoi(digits)
		select {
		case <-time.After(time.Duration(d) * time.Second):
		case <-r.Context().Done():
			return
		}
	} else {
		for range c.chunks {
			if c.delay > 0 {
				time.Sleep(c.delay)
			}
			chunk(`{"content":"`+content+`"}`, "")
		}
	}
	chunk(`{}`, "stop")
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", model, c.chunks, c.chunks+8)
	_ = rc.Flush()
}
