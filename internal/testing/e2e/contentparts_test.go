package e2e

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	antoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/iopgw/iop/nodeagent"
)

// TestContentPartsAProviderCannotRead: a content part the provider-neutral
// form cannot carry (audio, a file) reaches an OpenAI-compatible upstream
// unchanged on the translated path, and is refused with a 400 naming it
// by a provider that reads only the neutral form — the sim on either path,
// a native Ollama upstream — rather than answered as if the client had not
// sent it. So is an Anthropic document block, on the sim's own Messages
// API and in its token count; thinking blocks of earlier turns are left
// out, as the API leaves them out.
func TestContentPartsAProviderCannotRead(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		simN, simT := Sim("sim-n", nodeagent.SimConfig{}), Sim("sim-t", nodeagent.SimConfig{})
		simN.Models, simN.Path = []string{"sim-normalized"}, nodeagent.PathNormalized
		simT.Models, simT.Path = []string{"sim-tunnel"}, nodeagent.PathTunnel
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{simN, simT,
			c.WallProvider("w-ollama", "ollama", "", "ollama-native"), c.WallProvider("w-openai", "openai", nodeagent.PathNormalized, "openai-normalized")}}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	audio := oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{oai.TextContentPart("what is said?"),
		oai.InputAudioContentPart(oai.ChatCompletionContentPartInputAudioInputAudioParam{Data: "AAAA", Format: "wav"})})
	for _, model := range []string{"sim-normalized", "sim-tunnel", "ollama-native"} {
		_, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{audio}})
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "messages[0].content[1].type" {
			t.Errorf("%s: audio in a chat: %v", model, err)
		}
	}
	if n := len(c.Wall.AttemptsFor("ollama-native")); n != 0 {
		t.Errorf("the Ollama upstream got %d requests it cannot read", n)
	}
	r, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: "openai-normalized", Messages: []oai.ChatCompletionMessageParamUnion{audio}})
	if err != nil || len(r.Choices) != 1 {
		t.Fatalf("an OpenAI-compatible upstream on the translated path: %v", err)
	}
	if at := c.Wall.AttemptsFor("openai-normalized"); len(at) != 1 || !bytes.Contains(at[0].Body, []byte(`"input_audio":{"data":"AAAA","format":"wav"}`)) {
		t.Errorf("the upstream did not get the audio part: %d attempts", len(at))
	}

	file := responses.ResponseNewParams{Model: "sim-normalized", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
			responses.ResponseInputContentParamOfInputText("summarise"),
			{OfInputFile: &responses.ResponseInputFileParam{FileData: oai.String("data:application/pdf;base64,AAAA"), Filename: oai.String("a.pdf")}},
		}, responses.EasyInputMessageRoleUser)}}}
	for _, model := range []string{"sim-normalized", "sim-tunnel"} {
		file.Model = model
		_, err := client.Responses.New(t.Context(), file)
		var apiErr *oai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input[0].content" {
			t.Errorf("%s: a file in a response request: %v", model, err)
		}
	}

	ant := anthropic.NewClient(antoption.WithBaseURL(c.URL), antoption.WithAPIKey("unused"), antoption.WithMaxRetries(0))
	pdf := anthropic.NewUserMessage(anthropic.NewTextBlock("summarise"), anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: "AAAA"}))
	for _, model := range []string{"sim-tunnel", "sim-normalized"} {
		_, err := ant.Messages.New(t.Context(), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: []anthropic.MessageParam{pdf}})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
			t.Errorf("%s: a document block: %v", model, err)
		}
	}
	_, err = ant.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "sim-tunnel", Messages: []anthropic.MessageParam{pdf}})
	if apiErr := (*anthropic.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Error(), "messages.0.content.1: a document block") {
		t.Errorf("a document block counted: %v", err)
	}
	m, err := ant.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "sim-tunnel", MaxTokens: 64, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("hi")),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig", "they greet me"), anthropic.NewTextBlock("Hello.")),
		anthropic.NewUserMessage(anthropic.NewTextBlock("and again"))}})
	if err != nil || len(m.Content) != 1 || !strings.HasPrefix(m.Content[0].Text, "You said: and again") {
		t.Errorf("an earlier turn's thinking: %+v %v", m, err)
	}
}

// TestContentPartsOnAMixedModel: a model served both by a provider that
// reads only the neutral form (the sim, translated) and by one that gets
// the Chat body itself (an OpenAI-compatible upstream) serves a request
// with a part the first cannot read on the second, every time — not a
// 400 or an answer depending on which provider the pool picked; only
// when no provider of the model can take it is the refusal the client's.
func TestContentPartsOnAMixedModel(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		sims := []nodeagent.ProviderConfig{}
		for _, id := range []string{"sim-1", "sim-2"} {
			s := Sim(id, nodeagent.SimConfig{})
			s.Models, s.Path = []string{"mixed", "sim-only"}, nodeagent.PathNormalized
			sims = append(sims, s)
		}
		return []NodeSpec{{ID: "n", Providers: append(sims, c.WallProvider("w", "openai", nodeagent.PathNormalized, "mixed"))}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	audio := oai.UserMessage([]oai.ChatCompletionContentPartUnionParam{oai.TextContentPart("what is said?"),
		oai.InputAudioContentPart(oai.ChatCompletionContentPartInputAudioInputAudioParam{Data: "AAAA", Format: "wav"})})
	for i := range 8 {
		r, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: "mixed", Messages: []oai.ChatCompletionMessageParamUnion{audio}})
		if err != nil || len(r.Choices) != 1 {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := len(c.Wall.AttemptsFor("mixed")); n != 8 {
		t.Fatalf("the upstream that can read the audio got %d of 8 requests", n)
	}
	_, err := client.Chat.Completions.New(t.Context(), oai.ChatCompletionNewParams{Model: "sim-only", Messages: []oai.ChatCompletionMessageParamUnion{audio}})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "messages[0].content[1].type" {
		t.Fatalf("a model no provider of which can read it: %v", err)
	}
}
