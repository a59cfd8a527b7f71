package sim

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/iopgw/iop/execution"
)

// TestTunnelInputTokens: the sim's Responses token count is the
// input_tokens its answer to the same request reports (instructions
// alone counted too), in OpenAI's shape and without a usage frame (a count
// is not usage); what the sim would refuse to answer it refuses to count.
func TestTunnelInputTokens(t *testing.T) {
	p := New(Config{})
	for _, body := range []string{
		`{"model":"m","input":"count these words please"}`,
		`{"model":"m","instructions":"be brief","input":[{"role":"user","content":"and these"}]}`,
	} {
		_, answer := tunnel(t, p, "/v1/responses", body)
		var resp struct {
			Usage struct {
				InputTokens int64 `json:"input_tokens"`
			}
		}
		if err := json.Unmarshal(answer, &resp); err != nil || resp.Usage.InputTokens == 0 {
			t.Fatalf("%s: %s %v", body, answer, err)
		}
		status, count, usage := countTokens(t, p, "/v1/responses/input_tokens", body)
		if status != http.StatusOK || count.Object != "response.input_tokens" || count.InputTokens != resp.Usage.InputTokens || usage {
			t.Errorf("%s: %d %+v (usage frame %v), want %d", body, status, count, usage, resp.Usage.InputTokens)
		}
	}
	if status, count, _ := countTokens(t, p, "/v1/responses/input_tokens", `{"model":"m","instructions":"be brief"}`); status != http.StatusOK || count.InputTokens == 0 {
		t.Errorf("instructions alone: %d %+v", status, count)
	}
	for body, param := range map[string]string{
		`{"model":"m","input":"hi","previous_response_id":"resp_1"}`:                                   "previous_response_id",
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]}`: "input[0].content",
	} {
		status, answer := tunnel(t, p, "/v1/responses/input_tokens", body)
		if v := decodeAnswer(t, answer); status != http.StatusBadRequest || v.Error.Param != param {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, status, answer, param)
		}
	}
	if status, count, usage := countTokens(t, p, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK || count.InputTokens == 0 || usage {
		t.Errorf("Anthropic's count: %d %+v (usage frame %v)", status, count, usage)
	}
}

type tokenCount struct {
	Object      string
	InputTokens int64 `json:"input_tokens"`
}

// countTokens posts a count to the sim: its status, its count, and whether
// it reported usage.
func countTokens(t *testing.T, p *Provider, path, body string) (status int, c tokenCount, usage bool) {
	t.Helper()
	var raw []byte
	em := execution.NewFrameEmitter(func(f execution.ProviderTunnelFrame) {
		switch f.Type {
		case execution.FrameTypeResponseStart:
			status = f.Status
		case execution.FrameTypeBody:
			raw = append(raw, f.Body...)
		case execution.FrameTypeUsage:
			usage = true
		}
	})
	if err := p.Tunnel(t.Context(), &execution.ProviderTunnelRequest{Method: http.MethodPost, Path: path, Body: []byte(body)}, em); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return status, c, usage
}
