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
		"Anthropic-Version":   {"2023-06-01"},
		"Anthropic-Beta":      {"tools-2024-04-04"},
		"Anthropic-Api-Key":   {"k2"},
	}
	out := ForUpstream(in)
	for _, gone := range []string{"Authorization", "Cookie", "X-Api-Key", "Anthropic-Api-Key", "Connection", "X-Secret-Hop", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Accept-Encoding", "X-Forwarded-For"} {
		if out.Get(gone) != "" {
			t.Errorf("%s forwarded", gone)
		}
	}
	if out.Get("Openai-Organization") != "" || ForUpstream(in, "OpenAI-Organization").Get("Openai-Organization") != "org" {
		t.Error("OpenAI-Organization: stripped by default, forwarded when allowed")
	}
	for _, kept := range []string{"Content-Type", "X-Stainless-Os", "X-Custom", "Anthropic-Version", "Anthropic-Beta"} {
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

func TestPropagateAndForClient(t *testing.T) {
	in := http.Header{"Traceparent": {"00-a-b-01"}, "Openai-Beta": {"assistants=v2"}, "Idempotency-Key": {"k1"}, "X-Request-Id": {"r"}, "Authorization": {"Bearer x"}}
	p := Propagate(in)
	if len(p) != 4 || p["Traceparent"][0] != "00-a-b-01" || p["Authorization"] != nil {
		t.Fatalf("propagated %v", p)
	}
	out := ForClient(http.Header{"Content-Length": {"1"}, "Transfer-Encoding": {"chunked", "chunked"}, "Set-Cookie": {"a=b"}, "Location": {"http://x"},
		"Server": {"vllm"}, "Content-Encoding": {"gzip"}, "Content-Type": {"text/event-stream"}, "X-Request-Id": {"up"}})
	if len(out) != 2 || out.Get("Content-Type") == "" || out.Get("X-Request-Id") != "up" {
		t.Fatalf("for client %v", out)
	}
}

// The lists ForUpstream deletes by key are canonical, as net/http stores
// a request's keys: a non-canonical entry would never match.
func TestListsAreCanonical(t *testing.T) {
	for _, list := range [][]string{hopByHop, credentials, edgeOnly, CredentialScoped, fromNode, Propagated} {
		for _, k := range list {
			if c := http.CanonicalHeaderKey(k); c != k {
				t.Errorf("%q is not canonical (%q)", k, c)
			}
		}
	}
}

// The in-place filters drop exactly what the copying one does, and the
// copy is apart from its input: values appended to one never show in the
// other.
func TestFiltersAgree(t *testing.T) {
	in := func() http.Header {
		return http.Header{"Connection": {"x-listed , Keep-Alive", "other-hop"}, "X-Listed": {"1"}, "Other-Hop": {"2"},
			"Authorization": {"Bearer c"}, "Openai-Project": {"p"}, "Host": {"h"}, "Accept": {"a", "b"}, "X-Kept": {"k"},
			"Server": {"s"}, "Upgrade": {"h2c"}}
	}
	copied := ForUpstream(in(), "openai-project")
	inPlace := FilterForUpstream(in(), "openai-project")
	want := http.Header{"Openai-Project": {"p"}, "Accept": {"a", "b"}, "X-Kept": {"k"}, "Server": {"s"}}
	for _, got := range []http.Header{copied, inPlace} {
		if len(got) != len(want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
		for k, v := range want {
			if got.Get(k) != v[0] || len(got[k]) != len(v) {
				t.Fatalf("kept %v, want %v", got, want)
			}
		}
	}
	src := in()
	out := ForUpstream(src)
	out["Accept"] = append(out["Accept"], "c")
	out["X-Kept"] = append(out["X-Kept"], "more")
	if len(src["Accept"]) != 2 || len(src["X-Kept"]) != 1 || len(out["Accept"]) != 3 {
		t.Fatalf("the copy shares its values: in %v, out %v", src, out)
	}
	resp := ForClient(in())
	if len(resp) != 5 || resp.Get("Accept") != "a" || resp.Get("X-Kept") != "k" || resp.Get("Server") != "" || resp.Get("X-Listed") != "" {
		t.Fatalf("for client %v", resp)
	}
	if up := FromUpstream(in()); up.Get("Server") != "s" || up.Get("X-Listed") != "" || up.Get("Other-Hop") != "" || up.Get("Upgrade") != "" {
		t.Fatalf("from upstream %v", up)
	}
}
