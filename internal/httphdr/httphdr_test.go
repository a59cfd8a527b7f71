package httphdr

import (
	"net/http"
	"testing"
)

func TestForUpstream(t *testing.T) {
	in := http.Header{
		"Authorization":       {"Bearer sk-client"},
		"Cookie":              {"a=b"},
		"X-Api-Key":           {"k"},
		"Connection":          {"keep-alive, X-Secret-Hop"},
		"X-Secret-Hop":        {"v"},
		"Keep-Alive":          {"5"},
		"Transfer-Encoding":   {"chunked"},
		"Content-Length":      {"12"},
		"Accept-Encoding":     {"gzip"},
		"X-Forwarded-For":     {"1.2.3.4"},
		"Content-Type":        {"application/json"},
		"Openai-Organization": {"org"},
		"X-Stainless-Os":      {"Linux"},
		"X-Custom":            {"1"},
	}
	out := ForUpstream(in)
	for _, gone := range []string{"Authorization", "Cookie", "X-Api-Key", "Connection", "X-Secret-Hop", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Accept-Encoding", "X-Forwarded-For"} {
		if out.Get(gone) != "" {
			t.Errorf("%s forwarded", gone)
		}
	}
	for _, kept := range []string{"Content-Type", "Openai-Organization", "X-Stainless-Os", "X-Custom"} {
		if out.Get(kept) == "" {
			t.Errorf("%s dropped", kept)
		}
	}
	if in.Get("Authorization") == "" {
		t.Fatal("input mutated")
	}
}

func TestFromUpstream(t *testing.T) {
	out := FromUpstream(http.Header{"Connection": {"close"}, "Transfer-Encoding": {"chunked"}, "X-Request-Id": {"req_1"}, "Content-Type": {"text/event-stream; charset=utf-8"}, "Retry-After-Ms": {"10"}})
	if out.Get("Connection") != "" || out.Get("Transfer-Encoding") != "" {
		t.Fatal("hop-by-hop forwarded")
	}
	if out.Get("X-Request-Id") != "req_1" || out.Get("Content-Type") != "text/event-stream; charset=utf-8" || out.Get("Retry-After-Ms") != "10" {
		t.Fatalf("end-to-end headers lost: %v", out)
	}
	if len(ForUpstream(nil)) != 0 || len(FromUpstream(nil)) != 0 {
		t.Fatal("nil input")
	}
}
