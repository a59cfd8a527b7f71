package e2e

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/nodeagent"
)

// TestSimServesEmbeddingsAndCompletions (issue 30): the built-in sim — so
// `make run` — answers /v1/embeddings and /v1/completions, checked with
// openai-go: stable unit vectors of the asked dimensions (float and
// base64 alike), and the sim's answer as text completions, whole and
// streamed.
func TestSimServesEmbeddingsAndCompletions(t *testing.T) {
	c := Start(t, Options{}, func(*Cluster) []NodeSpec {
		normalized := Sim("sim-a", nodeagent.SimConfig{})
		normalized.Path = nodeagent.PathNormalized
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{normalized, Sim("sim-b", nodeagent.SimConfig{})}}} // as iop dev
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	emb, err := client.Embeddings.New(ctx, oai.EmbeddingNewParams{Model: "iop-sim", Dimensions: oai.Int(16),
		Input: oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello", "world", "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 3 || len(emb.Data[0].Embedding) != 16 || emb.Usage.PromptTokens != 3 {
		t.Fatalf("embeddings %+v", emb)
	}
	norm := 0.0
	for _, x := range emb.Data[0].Embedding {
		norm += x * x
	}
	if math.Abs(norm-1) > 1e-4 || !equalVec(emb.Data[0].Embedding, emb.Data[2].Embedding) || equalVec(emb.Data[0].Embedding, emb.Data[1].Embedding) {
		t.Fatalf("vectors: |v|² %v, same text same vector, other text another", norm)
	}
	// base64, as the Python and Node SDKs ask by default.
	resp, err := http.Post(c.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"iop-sim","input":"hello","dimensions":16,"encoding_format":"base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	var b64 struct {
		Data []struct{ Embedding string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(readAll(t, resp)), &b64); err != nil || len(b64.Data) != 1 {
		t.Fatalf("base64 answer: %v %+v", err, b64)
	}
	raw, _ := base64.StdEncoding.DecodeString(b64.Data[0].Embedding)
	for i, want := range emb.Data[0].Embedding {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); math.Abs(float64(got)-want) > 1e-6 {
			t.Fatalf("base64 component %d: %v, float %v", i, got, want)
		}
	}
	comp, err := client.Completions.New(ctx, oai.CompletionNewParams{Model: "iop-sim", Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 1 || !strings.Contains(comp.Choices[0].Text, "iop-sim") || comp.Choices[0].FinishReason != "stop" || comp.Usage.TotalTokens == 0 {
		t.Fatalf("completion %+v", comp)
	}
	s := client.Completions.NewStreaming(ctx, oai.CompletionNewParams{Model: "iop-sim", Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("hi")}})
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Text)
		}
	}
	if err := s.Err(); err != nil || text.String() != comp.Choices[0].Text {
		t.Fatalf("streamed completion %q (%v), whole %q", text.String(), err, comp.Choices[0].Text)
	}
	resp, err = http.Post(c.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"iop-sim"}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(body, `"param":"input"`) {
		t.Fatalf("embeddings without input: %d %s", resp.StatusCode, body)
	}
}

func equalVec(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSimServesModerationsImagesRerank (issue 30): /v1/moderations and
// /v1/images/generations through openai-go, and /v1/rerank (vLLM's and
// Jina's shape) over HTTP, all answered by the sim through the tunnel.
func TestSimServesModerationsImagesRerank(t *testing.T) {
	c := Start(t, Options{}, func(*Cluster) []NodeSpec {
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	mod, err := client.Moderations.New(ctx, oai.ModerationNewParams{Model: "iop-sim",
		Input: oai.ModerationNewParamsInputUnion{OfStringArray: []string{"hello", "world"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mod.Results) != 2 || mod.Results[0].Flagged || mod.Results[0].CategoryScores.Violence >= 0.001 {
		t.Fatalf("moderation %+v", mod)
	}
	img, err := client.Images.Generate(ctx, oai.ImageGenerateParams{Model: "iop-sim", Prompt: "a small square", N: oai.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Data) != 2 {
		t.Fatalf("images %+v", img)
	}
	png, err := base64.StdEncoding.DecodeString(img.Data[0].B64JSON)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("image bytes %q %v", png, err)
	}
	resp, err := http.Post(c.URL+"/v1/rerank", "application/json",
		strings.NewReader(`{"model":"iop-sim","query":"green tea","documents":["coffee","green tea leaves","tea"],"top_n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	var rr struct {
		Results []struct {
			Index          int     `json:"index"`
			RelevanceScore float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(readAll(t, resp)), &rr); err != nil || len(rr.Results) != 2 || rr.Results[0].Index != 1 ||
		rr.Results[0].RelevanceScore != 1 || rr.Results[1].Index != 2 {
		t.Fatalf("rerank %+v %v", rr, err)
	}
	if _, err := client.Images.Generate(ctx, oai.ImageGenerateParams{Model: "iop-sim", Prompt: "x", ResponseFormat: oai.ImageGenerateParamsResponseFormatURL}); err == nil ||
		!strings.Contains(err.Error(), "400") {
		t.Fatalf("a url response format: %v", err)
	}
}

// TestResponsesStoreIsTheSameOnBothPaths (issue 30): a Responses answer of
// iop dev's sims says store=false whether it was tunnelled from the sim or
// translated by iop (neither stores the response), streamed or not.
func TestResponsesStoreIsTheSameOnBothPaths(t *testing.T) {
	c := Start(t, Options{}, func(*Cluster) []NodeSpec {
		translated := Sim("translated", nodeagent.SimConfig{})
		translated.Path, translated.Models = nodeagent.PathNormalized, []string{"via-iop"}
		tunnelled := Sim("tunnelled", nodeagent.SimConfig{})
		tunnelled.Models = []string{"via-sim"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{translated, tunnelled}}}
	})
	for _, model := range []string{"via-iop", "via-sim"} {
		for _, stream := range []string{"false", "true"} {
			resp, err := http.Post(c.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"`+model+`","stream":`+stream+`,"input":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != 200 || !strings.Contains(body, `"store":false`) || strings.Contains(body, `"store":true`) {
				t.Errorf("%s stream=%s: %d, store not false:\n%.400s", model, stream, resp.StatusCode, body)
			}
		}
	}
}

// TestUnservedEndpointIsNamed (issue 30): an endpoint iop has, asked of a
// model none of whose providers serve it, is a 404 naming the model and
// the endpoint — never an upstream's "Invalid URL".
func TestUnservedEndpointIsNamed(t *testing.T) {
	c := Start(t, Options{}, func(c *Cluster) []NodeSpec {
		chatOnly := c.WallProvider("w", "openai", nodeagent.PathAuto, "ok")
		chatOnly.Surfaces = []string{"chat"}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{chatOnly}}}
	})
	resp, err := http.Post(c.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"ok","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"code":"model_not_supported"`) || !strings.Contains(body, "/v1/embeddings") ||
		!strings.Contains(body, "'ok'") || strings.Contains(body, "Invalid URL") || len(c.Wall.Attempts()) != 0 {
		t.Fatalf("%d %s (upstream saw %d requests)", resp.StatusCode, body, len(c.Wall.Attempts()))
	}
}

// TestModerationWithoutModel: OpenAI's moderations API defaults its model
// to omni-moderation-latest, so a request that names none (openai-go's
// params without a model) is routed to that name — here an alias of the
// sim's model, whose upstream receives the target's name — and, where no
// provider serves the name, is a 404 naming it.
func TestModerationWithoutModel(t *testing.T) {
	for _, aliased := range []bool{true, false} {
		c := Start(t, Options{Gateway: func(g *gateway.Config) {
			if aliased {
				g.Models = []gateway.ModelConfig{{Name: "omni-moderation-latest", Targets: []pool.ModelTarget{{Model: "iop-sim"}}}}
			}
		}}, func(*Cluster) []NodeSpec {
			return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{Sim("sim", nodeagent.SimConfig{})}}}
		})
		client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		mod, err := client.Moderations.New(context.Background(), oai.ModerationNewParams{
			Input: oai.ModerationNewParamsInputUnion{OfString: oai.String("hello")}})
		if !aliased {
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" ||
				!strings.Contains(apiErr.Message, "names no model") || !strings.Contains(apiErr.Message, "`omni-moderation-latest`") {
				t.Fatalf("no provider of omni-moderation-latest: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// The sim answers with the model its request named.
		if len(mod.Results) != 1 || mod.Results[0].Flagged || mod.Model != "iop-sim" {
			t.Fatalf("moderation %+v", mod)
		}
	}
}
