package pool

import (
	"slices"
	"strings"
	"time"

	"github.com/iopgw/iop/wire"
)

// providerKey identifies a provider on one connection.
type ProviderKey struct {
	NodeID     string
	Generation uint64
	ProviderID string // the node's provider id
}

// ID is the edge-owned provider id.
func (k ProviderKey) ID() string { return k.NodeID + "/" + k.ProviderID }

// pooled is one advertised provider on a live connection.
type pooled struct {
	key      ProviderKey
	ad       *wire.ProviderAdvertisement
	inFlight int
	lastUsed uint64
	priority int
	disabled bool // configuration health
	outlier  outlierState
	probe    string // the last connect probe's evidence (status only; routing ignores it)
	// advertised is the capacity the node advertised when it was more
	// than node_limits.max_capacity (0: not clamped), for the status views.
	advertised int
	probedAt   time.Time         // when it answered
	served     map[string]string // servedIndex(ad)
}

// advertise sets the provider's advertisement and its index of names.
func (p *pooled) advertise(ad *wire.ProviderAdvertisement) {
	p.ad, p.served = ad, servedIndex(ad)
}

// ServedName is the name under which ad serves model, or "": the first of
// its models that names model. Names compare as the adapter does: Ollama
// treats "llama3.2" and "llama3.2:latest" as one model. (The pool looks
// names up in an index of each advertisement, servedIndex, built to give
// the same answers.)
func ServedName(ad *wire.ProviderAdvertisement, model string) string {
	ollama := ad.GetAdapter() == "ollama"
	for _, m := range ad.GetModels() {
		if m == model || ollama && OllamaName(m) == OllamaName(model) {
			return m
		}
	}
	return ""
}

// servedIndex maps each name a request may use for a model of ad to the
// name ServedName gives it, so that a request looks its model up once
// instead of comparing it with every advertised model on every
// candidate (a node serving 50 Ollama models made each comparison build
// two names). For Ollama, a model is indexed under its tagged name and,
// for the implicit tag, its bare one too; the first advertised model
// that answers a name keeps it, as ServedName's scan does.
func servedIndex(ad *wire.ProviderAdvertisement) map[string]string {
	models := ad.GetModels()
	idx := make(map[string]string, len(models))
	add := func(name, m string) {
		if _, ok := idx[name]; !ok {
			idx[name] = m
		}
	}
	ollama := ad.GetAdapter() == "ollama"
	for _, m := range models {
		if !ollama {
			add(m, m)
			continue
		}
		tagged := OllamaName(m)
		add(tagged, m)
		if bare, ok := strings.CutSuffix(tagged, ":latest"); ok && OllamaName(bare) == tagged {
			add(bare, m)
		}
	}
	return idx
}

// ollamaName adds Ollama's implicit ":latest" tag to a name without one.
func OllamaName(m string) string {
	if strings.Contains(m[strings.LastIndex(m, "/")+1:], ":") {
		return m
	}
	return m + ":latest"
}

// tunnelable reports whether ad can carry a request of the client
// surface through unchanged: any surface for a tunnel-capable provider on
// a forced path, only the surfaces its upstream serves natively under
// path auto.
func tunnelable(ad *wire.ProviderAdvertisement, surface string) bool {
	if !ad.GetSupportsTunnel() {
		return false
	}
	return ad.GetExecutionPath() != pathAuto || nativeSurface(ad.GetSurfaces(), surface)
}

// nativeSurface reports whether surface is in the advertised list; a
// provider that advertised none serves every OpenAI surface.
func nativeSurface(surfaces []string, surface string) bool {
	return len(surfaces) == 0 || slices.Contains(surfaces, surface)
}

func (p *pooled) capacity() int { return int(p.ad.GetCapacity()) }

func (p *pooled) hasSlot() bool { return p.capacity() <= 0 || p.inFlight < p.capacity() }
