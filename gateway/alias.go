package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/streamgate"
)

// aliasNames are the configured aliases, for /v1/models.
func (c *Config) aliasNames() []string {
	var out []string
	for _, m := range c.Models {
		if len(m.Targets) > 0 {
			out = append(out, m.Name)
		}
	}
	return out
}

// aliasTargets are the targets of model, if it is an alias.
func (c *Config) aliasTargets(model string) []pool.ModelTarget {
	for _, m := range c.Models {
		if strings.EqualFold(m.Name, model) {
			return m.Targets
		}
	}
	return nil
}

// checkAliases records the mistakes in aliases.
func (c *Config) checkAliases(bad badFunc) {
	for i, m := range c.Models {
		for j, t := range m.Targets {
			key := fmt.Sprintf("models[%d].targets[%d]", i, j)
			if t.Model == "" {
				bad(key+".model", "required: the provider's model name")
			}
			if t.Weight < 0 {
				bad(key+".weight", "must not be negative")
			}
			if t.Provider != "" && !strings.Contains(t.Provider, "/") {
				bad(key+".provider", "must be <node_id>/<provider id>, e.g. node-1/vllm")
			}
		}
	}
}

// modelNames are the names clients may ask for now: every model an
// admissible provider serves, and every alias one of whose targets is
// served, sorted.
func (g *Gateway) modelNames(c echo.Context) []string {
	names := g.pool.Models()
	for _, a := range g.confOf(c).aliasNames() {
		if g.pool.Known(a) && !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	// A key lists only what it may use.
	key := access(c).KeyID
	names = slices.DeleteFunc(names, func(m string) bool { return !g.tenants.Allows(key, m) })
	slices.Sort(names)
	return names
}

// withAlias makes an alias's answers name it: unless the model exposes its
// target, its Chat, Responses and Ollama requests run on the translated
// path, which iop renders under the name the client asked for (the tunnel
// would carry the upstream's own name). Endpoints that only tunnel
// (embeddings, completions) answer with the target's name.
func (g *Gateway) withAlias(cfg *Config, sreq *streamgate.Request) {
	if sreq.Work.Run == nil || !cfg.rendersAlias(sreq.Model) {
		return
	}
	sreq.AskedModelName = true
	translatedOnly(sreq, cfg.rendersAlias)
}

// rendersAlias reports whether model is an alias whose answers iop renders
// under the alias's name.
func (c *Config) rendersAlias(model string) bool {
	m := c.model(model)
	return len(m.Targets) > 0 && !m.ExposeTarget
}
