package openai

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/iopgw/iop/execution"
)

func run(t *testing.T, body string, status int) ([]execution.RunEvent, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-node" {
			t.Errorf("request %s %v", r.URL.Path, r.Header)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL + "/v1", InstanceKey: srv.URL + "/v1"})
	p.cfg.Credentials.APIKey = "sk-node"
	var evs []execution.RunEvent
	em := execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) })
	err := p.Execute(context.Background(), &execution.RunRequest{Model: "m", Messages: []execution.Message{{Role: "user", Content: "hi"}}}, em)
	return evs, err
}

func text(evs []execution.RunEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Delta)
	}
	return b.String()
}

func TestSSEReaderRobustness(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	tests := []struct {
		name       string
		body       string
		wantText   string
		wantFinish string
		wantErr    bool
	}{
		{"LF", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "a", "stop", false},
		{"CRLF", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n", "a", "", false},
		{"comments and event lines", ": ping\n\nevent: message\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n: ping\n\ndata: [DONE]\n\n", "b", "", false},
		{"line over 64 KiB", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + big + "\"}}]}\n\ndata: [DONE]\n\n", big, "", false},
		{"no DONE but finish_reason", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"},\"finish_reason\":\"length\"}]}\n\n", "c", "length", false},
		{"no DONE no finish", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"}}]}\n\n", "c", "", true},
		{"malformed event skipped", "data: {\"choices\":[{\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"f\"}}]}\n\ndata: [DONE]\n\n", "f", "", false},
		{"mid-stream error", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"d\"}}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":\"x\"}}\n\n", "d", "", true},
		{"usage chunk", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"e\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\ndata: [DONE]\n\n", "e", "stop", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := run(t, tt.body, 200)
			if tt.wantErr {
				var f *execution.ExecutionFailure
				if !errors.As(err, &f) || f.Code != execution.FailureCodeUpstreamError {
					t.Fatalf("err %v, want an upstream_error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			if text(evs) != tt.wantText || last.Type != execution.EventTypeComplete || last.FinishReason != tt.wantFinish {
				t.Fatalf("text %d bytes, last %+v", len(text(evs)), last)
			}
			if tt.name == "usage chunk" && (last.Usage == nil || last.Usage.TotalTokens != 4) {
				t.Fatalf("usage %+v", last.Usage)
			}
		})
	}
}

func TestUpstreamErrorStatus(t *testing.T) {
	evs, err := run(t, `{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 400)
	if err != nil || len(evs) != 1 || evs[0].Type != execution.EventTypeError {
		t.Fatalf("%v %v", evs, err)
	}
	u := evs[0].Failure.Upstream
	if u.Status != 400 || u.Code != "context_length_exceeded" || u.Param != "messages" || u.Message != "too long" {
		t.Fatalf("upstream %+v", u)
	}
}

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"m1"},{"id":"m2"}]}`))
			return
		}
		w.WriteHeader(500)
	}))
	defer srv.Close()
	p := New(Config{BaseURL: srv.URL + "/v1", InstanceKey: "k"})
	for target, want := range map[string]execution.HealthStatus{"m1": execution.HealthAvailable, "m3": execution.HealthUnavailable} {
		r, err := p.ProbeTarget(context.Background(), execution.ProbeRequest{Adapter: "openai", Target: target})
		if err != nil || r.Status != want || r.InstanceKey != "k" || r.Target != target {
			t.Fatalf("%s: %+v %v", target, r, err)
		}
	}
	bad := New(Config{BaseURL: srv.URL + "/nope/v1"})
	if _, err := bad.ProbeTarget(context.Background(), execution.ProbeRequest{Target: "m1"}); err == nil {
		t.Fatal("an HTTP 500 probe is not an error")
	}
	down := New(Config{BaseURL: "http://127.0.0.1:1/v1?key=SENTINEL"})
	if _, err := down.ProbeTarget(context.Background(), execution.ProbeRequest{Target: "m1"}); err == nil || strings.Contains(err.Error(), "SENTINEL") {
		t.Fatalf("unreachable probe: %v", err)
	}
}

// TestAnswerReadAsWhatItIs: the normalized path reads the upstream's
// answer by what it is, not by what it asked for: a whole chat
// completion to a streaming request (a server that does not stream) is
// its events; a stream labelled text/plain or application/json is read
// as a stream; an error object in a 200 is the upstream's error, with its
// status class; an empty body or text is a failure, never an answer.
func TestAnswerReadAsWhatItIs(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		wantText       string
		wantStatus     int // of the failure; 0: an answer
	}{
		{"whole JSON", "application/json", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`, "whole", 0},
		{"a stream as text/plain", "text/plain", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"s\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "s", 0},
		{"a stream as JSON", "application/json", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"j\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "j", 0},
		{"an error object", "application/json", `{"error":{"message":"slow down","type":"rate_limit_error"}}`, "", 429},
		{"empty", "application/json", "", "", 200},
		{"text", "text/plain", "Internal error", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			p := New(Config{BaseURL: srv.URL + "/v1", InstanceKey: srv.URL + "/v1"})
			var evs []execution.RunEvent
			em := execution.NewEmitter(func(ev execution.RunEvent) { evs = append(evs, ev) })
			err := p.Execute(t.Context(), &execution.RunRequest{Model: "m", Stream: true, Messages: []execution.Message{{Role: "user", Content: "hi"}}}, em)
			var f *execution.ExecutionFailure
			if !errors.As(err, &f) && len(evs) > 0 && evs[len(evs)-1].Type == execution.EventTypeError {
				f = evs[len(evs)-1].Failure
			}
			switch {
			case tc.wantStatus == 0 && (f != nil || text(evs) != tc.wantText || evs[len(evs)-1].Type != execution.EventTypeComplete):
				t.Fatalf("%v, text %q", f, text(evs))
			case tc.wantStatus != 0 && (f == nil || f.Upstream == nil || f.Upstream.Status != tc.wantStatus):
				t.Fatalf("%v (%+v), want a failure with status %d", err, f, tc.wantStatus)
			}
		})
	}
}
