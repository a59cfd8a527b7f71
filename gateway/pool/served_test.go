package pool

import (
	"testing"

	"github.com/iopgw/iop/wire"
)

// TestServedIndexMatchesServedName: the index a provider's advertisement
// is looked up in answers every name as ServedName's scan does — exact
// names, Ollama's implicit tag both ways, namespaces and registries, and
// the first advertised model where two answer one name.
func TestServedIndexMatchesServedName(t *testing.T) {
	lists := [][]string{
		{"gpt-4o", "gpt-4o-mini", "llama3"},
		{"llama3", "llama3:latest", "llama3:8b", "qwen2.5:7b"},
		{"llama3:latest", "llama3", "library/mistral", "host:5000/ns/phi3", "phi3:latest"},
		{"x:latest", "x", ":latest", "", "a/b:c/d"},
	}
	names := []string{"", "gpt-4o", "gpt-4o:latest", "llama3", "llama3:latest", "llama3:8b", "llama3:70b", "qwen2.5", "qwen2.5:7b",
		"library/mistral", "library/mistral:latest", "host:5000/ns/phi3", "host:5000/ns/phi3:latest", "phi3", "phi3:latest",
		"x", "x:latest", ":latest", "a/b:c/d", "a/b:c/d:latest", "missing"}
	for _, adapter := range []string{"openai", "ollama", "vllm"} {
		for _, models := range lists {
			ad := &wire.ProviderAdvertisement{ProviderId: "p", Adapter: adapter, Models: models}
			idx := servedIndex(ad)
			for _, n := range names {
				if got, want := idx[n], ServedName(ad, n); got != want {
					t.Errorf("%s %q: %q is served as %q, want %q", adapter, models, n, got, want)
				}
			}
		}
	}
}

func BenchmarkServedName(b *testing.B) {
	models := make([]string, 50)
	for i := range models {
		models[i] = "bench-m" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	for _, adapter := range []string{"openai", "ollama"} {
		ad := &wire.ProviderAdvertisement{Adapter: adapter, Models: models}
		idx := servedIndex(ad)
		b.Run(adapter+"/scan", func(b *testing.B) {
			for b.Loop() {
				_ = ServedName(ad, "bench-mbx")
			}
		})
		b.Run(adapter+"/index", func(b *testing.B) {
			for b.Loop() {
				_ = idx["bench-mbx"]
			}
		})
	}
}
