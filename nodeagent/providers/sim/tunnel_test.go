package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestTunnelChatChoices: the sim's Chat answers the one choice it makes,
// and refuses a request for more (n > 1) with a 400 naming n rather than
// answering with fewer choices than asked.
func TestTunnelChatChoices(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct {
		body    string
		status  int
		choices int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK, 1},
		{`{"model":"m","n":1,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK, 1},
		{`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, 0},
		{`{"model":"m","n":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest, 0},
	} {
		var status int
		var body bytes.Buffer
		em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
			switch f.Type {
			case execution.FrameTypeResponseStart:
				status = f.Status
			case execution.FrameTypeBody:
				body.Write(f.Body)
			}
		})
		req := &execution.ProviderTunnelRequest{Method: http.MethodPost, Path: "/v1/chat/completions", Body: []byte(tc.body)}
		if err := p.Tunnel(t.Context(), req, em); err != nil {
			t.Fatal(err)
		}
		var v struct {
			Choices []json.RawMessage
			Error   struct{ Param string }
		}
		if err := json.Unmarshal(body.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v: %s", tc.body, err, body.Bytes())
		}
		if status != tc.status || len(v.Choices) != tc.choices || (tc.status == http.StatusBadRequest && v.Error.Param != "n") {
			t.Errorf("%s: %d %s, want %d with %d choices", tc.body, status, body.Bytes(), tc.status, tc.choices)
		}
	}
}

// TestTunnelResponsesIsStateless: the sim stores no response, so a
// request continuing one gets OpenAI's own refusal of an unknown
// previous response (and a conversation a refusal naming it) instead of
// an answer made without the context it asked for.
func TestTunnelResponsesIsStateless(t *testing.T) {
	p := New(Config{})
	for _, tc := range []struct {
		body        string
		status      int
		param, code string
	}{
		{`{"model":"m","input":"hi"}`, http.StatusOK, "", ""},
		{`{"model":"m","input":"hi","previous_response_id":null,"conversation":null}`, http.StatusOK, "", ""},
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, http.StatusBadRequest, "previous_response_id", "previous_response_not_found"},
		{`{"model":"m","input":"hi","stream":true,"previous_response_id":"resp_1"}`, http.StatusBadRequest, "previous_response_id", "previous_response_not_found"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, http.StatusBadRequest, "conversation", ""},
	} {
		var status int
		var body bytes.Buffer
		em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
			switch f.Type {
			case execution.FrameTypeResponseStart:
				status = f.Status
			case execution.FrameTypeBody:
				body.Write(f.Body)
			}
		})
		req := &execution.ProviderTunnelRequest{Method: http.MethodPost, Path: "/v1/responses", Body: []byte(tc.body)}
		if err := p.Tunnel(t.Context(), req, em); err != nil {
			t.Fatal(err)
		}
		var v struct {
			Status string
			Error  struct{ Param, Code, Message string }
		}
		if err := json.Unmarshal(body.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v: %s", tc.body, err, body.Bytes())
		}
		if status != tc.status || v.Error.Param != tc.param || v.Error.Code != tc.code || (tc.status == http.StatusOK && v.Status != "completed") {
			t.Errorf("%s: %d %s", tc.body, status, body.Bytes())
		}
	}
}
