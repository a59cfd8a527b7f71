package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/iopgw/iop/execution"
	"github.com/iopgw/iop/wire"
)

// Reload applies a new, resolved configuration's providers and log level
// without dropping an attempt: providers added are advertised, removed
// ones are no longer advertised nor accept new attempts (those running
// finish), changed ones are replaced for new attempts. Every edge gets
// the new advertisement at once. Keys that need a restart (node_id,
// token, edges, metrics, liveness, drain_timeout, log.format,
// gc_headroom_bytes) keep their
// running values; the error names them (the rest was applied).
func (a *Agent) Reload(ctx context.Context, next Config) error {
	a.provMu.Lock()
	old := a.cfg
	var fixed []string
	for key, same := range map[string]bool{"node_id": old.NodeID == next.NodeID, "token": old.Token == next.Token,
		"edges": reflect.DeepEqual(old.Edges, next.Edges), "metrics": old.Metrics == next.Metrics, "liveness": old.Liveness == next.Liveness,
		"drain_timeout": old.DrainTimeout == next.DrainTimeout, "log.format": old.Log.Format == next.Log.Format,
		"gc_headroom_bytes": old.GCHeadroomBytes == next.GCHeadroomBytes} {
		if !same {
			fixed = append(fixed, key)
		}
	}
	added, changed, removed, err := a.applyProviders(ctx, old.Providers, next.Providers)
	if err != nil {
		a.provMu.Unlock()
		return err
	}
	a.cfg.Providers = next.Providers
	a.provMu.Unlock()
	if a.opts.Level != nil {
		var lv slog.Level
		if lv.UnmarshalText([]byte(strings.ToUpper(next.Log.Level))) == nil {
			a.opts.Level.Set(lv)
		}
	}
	a.readvertise()
	a.log.Info("configuration reloaded", slog.Any("providers_added", added), slog.Any("providers_changed", changed),
		slog.Any("providers_removed", removed))
	if len(fixed) > 0 {
		return fmt.Errorf("applied, except keys that need a restart: %s", strings.Join(fixed, ", "))
	}
	return nil
}

// applyProviders brings the registry from old to next. Nothing changes
// when a new provider cannot be built.
func (a *Agent) applyProviders(ctx context.Context, old, next []ProviderConfig) (added, changed, removed []string, err error) {
	prev := map[string]ProviderConfig{}
	for _, pc := range old {
		prev[pc.ID] = pc
	}
	type build struct {
		desc execution.ProviderDescriptor
		p    execution.Provider
	}
	var builds []build
	keep := map[string]bool{}
	for i := range next {
		pc := &next[i]
		keep[pc.ID] = true
		if was, ok := prev[pc.ID]; ok && reflect.DeepEqual(was, *pc) {
			continue
		}
		p, err := newProvider(pc, a.malformed, a.log)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("providers[%d]: %w", i, err)
		}
		builds = append(builds, build{descriptorOf(pc), p})
		if _, ok := prev[pc.ID]; ok {
			changed = append(changed, pc.ID)
		} else {
			added = append(added, pc.ID)
		}
	}
	for _, b := range builds {
		replaced, err := a.registry.Replace(ctx, b.desc, b.p)
		if err != nil {
			return nil, nil, nil, err
		}
		a.retireProvider(replaced)
	}
	for id := range prev {
		if !keep[id] {
			removed = append(removed, id)
			a.retireProvider(a.registry.Remove(id))
		}
	}
	return added, changed, removed, nil
}

// retireProvider closes a provider taken out of the registry once the
// attempts that looked it up have had the drain timeout to finish.
func (a *Agent) retireProvider(p execution.Provider) {
	lc, ok := p.(execution.Lifecycle)
	if !ok {
		return
	}
	time.AfterFunc(a.cfg.DrainTimeout, func() { _ = lc.Close() })
}

// readvertise sends the current advertisement on every live session.
func (a *Agent) readvertise() {
	ad := a.advertisement()
	for _, s := range a.liveSessions() {
		if err := s.Send(&wire.NodeMessage{Msg: &wire.NodeMessage_Advertisement{Advertisement: ad}}); err != nil {
			a.log.Debug("re-advertisement not sent; the next session advertises", slog.String("error", err.Error()))
		}
	}
}

// Config returns a copy of the running configuration.
func (a *Agent) Config() Config {
	a.provMu.RLock()
	defer a.provMu.RUnlock()
	c := a.cfg
	c.Providers = append([]ProviderConfig(nil), a.cfg.Providers...)
	return c
}
