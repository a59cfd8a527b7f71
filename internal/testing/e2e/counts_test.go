package e2e

import (
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/nodeagent"
)

// TestTokenCounts: the official SDKs' token counts — OpenAI's
// responses.input_tokens and Anthropic's count_tokens — are served
// through the edge (the sim's equal to the input_tokens its answer to the
// same request reports), and neither is charged to the key: a count is
// not usage, as neither API bills it. A model whose providers do not
// serve Responses natively gets a 404 naming the surface.
func TestTokenCounts(t *testing.T) {
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Auth.Keys = []gateway.KeyConfig{{ID: "team-a", SHA256: gateway.HashToken("sk-a"), Limits: gateway.KeyLimits{TokensPerDay: 100000}}}
	}}, func(c *Cluster) []NodeSpec {
		chatOnly := c.WallProvider("w", "openai", nodeagent.PathAuto, "chat-only")
		chatOnly.Surfaces = []string{"chat"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{}), chatOnly}}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("sk-a"), option.WithMaxRetries(0))
	ctx := t.Context()
	input := "how many tokens are these words"
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "iop-sim", Instructions: oai.String("be brief"),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(input)}})
	if err != nil {
		t.Fatal(err)
	}
	charged := adminKeys(t, c)["team-a"].Today
	if charged == 0 {
		t.Fatal("the answer was not charged")
	}

	count, err := client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: oai.String("iop-sim"), Instructions: oai.String("be brief"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: oai.String(input)}})
	if err != nil || count.InputTokens != r.Usage.InputTokens || count.Object != "response.input_tokens" {
		t.Fatalf("count %+v %v, the answer's input_tokens %d", count, err, r.Usage.InputTokens)
	}
	ant := anthropic.NewClient(antoption.WithBaseURL(c.URL), antoption.WithAPIKey("sk-a"), antoption.WithMaxRetries(0))
	ac, err := ant.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "iop-sim",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(input))}})
	if err != nil || ac.InputTokens == 0 {
		t.Fatalf("Anthropic's count: %+v %v", ac, err)
	}
	if got := adminKeys(t, c)["team-a"].Today; got != charged {
		t.Errorf("the key was charged %d tokens for two counts", got-charged)
	}

	_, err = client.Responses.InputTokens.Count(ctx, responses.InputTokenCountParams{Model: oai.String("chat-only"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: oai.String(input)}})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_supported" {
		t.Errorf("a model served by Chat only: %v", err)
	}
	if n := len(c.Wall.AttemptsFor("chat-only")); n != 0 {
		t.Errorf("the Chat-only upstream got %d requests", n)
	}
}
