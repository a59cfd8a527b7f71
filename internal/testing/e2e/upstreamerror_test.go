package e2e

import (
	"errors"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/nodeagent"
)

// TestUpstreamErrorMessageIsTheUpstreams: an upstream's error answer
// reaches the client with the upstream's own message, code and param on
// the translated path as on the tunnel (before, the translated path's
// message read "upstream status 400: …", the node's wording of it).
func TestUpstreamErrorMessageIsTheUpstreams(t *testing.T) {
	const model = "ctx-length-400"
	for _, path := range []string{nodeagent.PathNormalized, nodeagent.PathTunnel} {
		t.Run(path, func(t *testing.T) {
			c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
				return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{c.WallProvider("w", "openai", path, model)}}}
			})
			client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
			_, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: model,
				Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" ||
				apiErr.Message != "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens." {
				t.Fatalf("%v", err)
			}
		})
	}
}
