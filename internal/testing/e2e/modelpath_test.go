package e2e

import (
	"errors"
	"net/http"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/iopgw/iop/nodeagent"
)

// TestModelRetrievedByItsFullName: a model named as vLLM names it
// ("org/name") is retrieved by the official SDK, which sends the name's
// "/" percent-encoded in the path; an unknown name is still a 404.
func TestModelRetrievedByItsFullName(t *testing.T) {
	const name = "meta-llama/Llama-3.1-8B-Instruct"
	c := Start(t, Options{}, func(*Cluster) []NodeSpec {
		sim := Sim("s", nodeagent.SimConfig{})
		sim.Models = []string{name}
		return []NodeSpec{{ID: "n", Providers: []nodeagent.ProviderConfig{sim}}}
	})
	client := oai.NewClient(option.WithBaseURL(c.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	m, err := client.Models.Get(t.Context(), name)
	if err != nil || m.ID != name {
		t.Fatalf("retrieve %s: %+v %v", name, m, err)
	}
	var apiErr *oai.Error
	if _, err := client.Models.Get(t.Context(), "meta-llama/other"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown name: %v", err)
	}
}
