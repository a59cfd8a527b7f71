package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/iopgw/iop/nodeagent"
)

// TestMessagesTranslatedToAChatUpstream: an Anthropic client's request
// for a model whose only provider is an OpenAI-compatible upstream is
// sent upstream as its Chat translation (system first, the Chat stream
// asked for with usage), and the upstream's Chat stream comes back as
// Anthropic's event sequence, text and stop reason intact.
func TestMessagesTranslatedToAChatUpstream(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", "", "gpt-x")}}}
	})
	body := `{"model":"gpt-x","max_tokens":64,"stream":true,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest(http.MethodPost, c.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var names []string
	var text strings.Builder
	stop := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, n)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var ev struct {
				Delta struct {
					Text       string `json:"text"`
					StopReason string `json:"stop_reason"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(d), &ev)
			text.WriteString(ev.Delta.Text)
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
		}
	}
	if resp.StatusCode != 200 || text.String() != "Hello world from the wall." || stop != "end_turn" ||
		len(names) < 5 || names[0] != "message_start" || names[len(names)-1] != "message_stop" {
		t.Fatalf("client got %d %q stop=%q events %v", resp.StatusCode, text.String(), stop, names)
	}
	at := c.Wall.Attempts()
	if len(at) != 1 || at[0].Path != "/v1/chat/completions" {
		t.Fatalf("upstream attempts %+v", at)
	}
	var up struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		MaxTokens     int  `json:"max_tokens"`
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(at[0].Body, &up); err != nil {
		t.Fatal(err)
	}
	if len(up.Messages) != 2 || up.Messages[0].Role != "system" || up.Messages[0].Content != "be brief" || up.Messages[1].Content != "hi" ||
		up.MaxTokens != 64 || !up.Stream || !up.StreamOptions.IncludeUsage {
		t.Fatalf("upstream got %s", at[0].Body)
	}
}
