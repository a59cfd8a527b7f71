package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// restartOnly are the keys a reload cannot change: listeners and their
// TLS, the edge id, and the node-link limits the listener was built with.
func restartOnly(old, cur *Config) []string {
	var keys []string
	for key, same := range map[string]bool{
		"listen": old.Listen == cur.Listen, "node_listen": old.NodeListen == cur.NodeListen,
		"admin_listen": old.AdminListen == cur.AdminListen, "tls": old.TLS == cur.TLS, "node_tls": old.NodeTLS == cur.NodeTLS,
		"edge_id": cur.EdgeID == "" || old.EdgeID == cur.EdgeID, "node_limits": old.NodeLimits == cur.NodeLimits,
		"node_link": old.NodeLink == cur.NodeLink, "log.format": old.Log.Format == cur.Log.Format,
		"log.flush_interval":      old.Log.FlushInterval == cur.Log.FlushInterval,
		"gc_headroom_bytes":       old.GCHeadroomBytes == cur.GCHeadroomBytes,
		"auth.limits_store":       old.Auth.LimitsStore == cur.Auth.LimitsStore,
		"auth.usage_file":         old.Auth.UsageFile == cur.Auth.UsageFile,
		"streamgate.budget_ratio": old.StreamGate.BudgetRatio == cur.StreamGate.BudgetRatio,
		"streamgate.budget_min":   old.StreamGate.BudgetMin == cur.StreamGate.BudgetMin,
		"tracing":                 old.Tracing == cur.Tracing,
		"node":                    reflect.DeepEqual(old.Node, cur.Node),
	} {
		if !same {
			keys = append(keys, key)
		}
	}
	return keys
}

// Reload applies a new configuration without dropping a stream: client
// keys, models, fallbacks and retry policies, provider policies, nodes,
// limits, the access log, the admin token and the log level take effect
// for new requests; requests in flight finish under the configuration
// they started with. An invalid configuration changes nothing. Keys that
// need a restart keep their running values; the error names them (the
// rest was applied).
func (g *Gateway) Reload(next Config) error {
	old := g.config()
	fixed := restartOnly(old, &next)
	// What needs a restart keeps its running value, and the new file is
	// validated as it will run: the admin token rule against the running
	// admin listener, not the one the file names.
	keepRunning(old, &next)
	next.Nodes = g.withBundled(next.Nodes)
	if err := next.Validate(); err != nil {
		g.reloads.WithLabelValues("rejected").Inc()
		return err
	}
	if err := weakensSecurity(old, &next); err != nil {
		g.reloads.WithLabelValues("rejected").Inc()
		return err
	}
	next.resolvePolicies()
	cur := g.gen.Load()
	sg, err := g.runtimeConfig(&next, cur.sg.Budget)
	if err != nil {
		g.reloads.WithLabelValues("rejected").Inc()
		return err
	}
	// Keys first: a request that takes the new generation is checked
	// against its keys, and one admitted after the reload is refused if
	// its key went away.
	g.auth.SetKeys(next.Auth.settings())
	g.tenants.Configure(next.Auth.Keys)
	g.corsMW.set(next.CORS)
	gen := cur.n + 1
	g.gen.Store(&generation{n: gen, cfg: &next, sg: sg}) // one step: new requests see all of it, requests in flight none of it
	g.pool.Reconfigure(next.Overlay, next.Outlier)
	g.hub.SetNodes(next.Nodes, next.DrainTimeout)
	if g.opts.Level != nil {
		var lv slog.Level
		if lv.UnmarshalText([]byte(strings.ToUpper(next.Log.Level))) == nil {
			g.opts.Level.Set(lv)
		}
	}
	g.reloads.WithLabelValues("applied").Inc()
	g.log.Info("configuration reloaded", "generation", gen, "changed", changedKeys(old, &next))
	if len(fixed) > 0 {
		return &RestartRequiredError{Keys: fixed}
	}
	return nil
}

// keepRunning copies into next the running values of the keys a reload
// cannot change.
func keepRunning(old, next *Config) {
	next.Listen, next.NodeListen, next.AdminListen, next.TLS, next.NodeTLS = old.Listen, old.NodeListen, old.AdminListen, old.TLS, old.NodeTLS
	next.EdgeID, next.NodeLimits, next.NodeLink, next.Log.Format, next.Log.FlushInterval = old.EdgeID, old.NodeLimits, old.NodeLink, old.Log.Format, old.Log.FlushInterval
	next.StreamGate.BudgetRatio, next.StreamGate.BudgetMin = old.StreamGate.BudgetRatio, old.StreamGate.BudgetMin
	next.Auth.LimitsStore, next.Auth.UsageFile = old.Auth.LimitsStore, old.Auth.UsageFile
	next.Tracing, next.Node, next.GCHeadroomBytes = old.Tracing, old.Node, old.GCHeadroomBytes
}

// ErrWeakerSecurity is a reload refused because it would open what the
// running configuration protects without saying so.
var ErrWeakerSecurity = errors.New("reload refused: it would weaken security")

// weakensSecurity refuses a reload that removes every client key (the
// API would open to anyone) or the admin token, unless the new file says
// so explicitly (auth.allow_anonymous, admin.allow_no_token): a file cut
// short by a non-atomic write must never open the gateway.
func weakensSecurity(old, next *Config) error {
	switch {
	case len(old.Auth.Keys) > 0 && len(next.Auth.Keys) == 0 && !next.Auth.AllowAnonymous:
		return fmt.Errorf("%w: the new configuration has no client keys (the API would need none); set auth.allow_anonymous: true to mean it", ErrWeakerSecurity)
	case old.Admin.TokenSHA256 != "" && next.Admin.TokenSHA256 == "" && !next.Admin.AllowNoToken:
		return fmt.Errorf("%w: the new configuration has no admin token (the admin API would need none); set admin.allow_no_token: true to mean it", ErrWeakerSecurity)
	}
	return nil
}

// ReloadFile loads path (file and environment, as at start) and applies
// it; a file that does not load or validate changes nothing and counts as
// a rejected reload.
func (g *Gateway) ReloadFile(path string) error {
	cfg, err := LoadConfig(path)
	if err != nil {
		g.reloads.WithLabelValues("rejected").Inc()
		return err
	}
	return g.Reload(cfg)
}

// RestartRequiredError names changed keys a reload could not apply.
type RestartRequiredError struct{ Keys []string }

func (e *RestartRequiredError) Error() string {
	return "applied, except keys that need a restart: " + strings.Join(e.Keys, ", ")
}

// IsRestartRequired reports whether err only says some keys need a restart.
func IsRestartRequired(err error) bool { return errors.As(err, new(*RestartRequiredError)) }

// changedKeys names the top-level keys whose value changed (never values:
// they may hold credentials).
func changedKeys(old, cur *Config) []string {
	var out []string
	ov, cv := reflect.ValueOf(*old), reflect.ValueOf(*cur)
	t := ov.Type()
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), cv.Field(i).Interface()) {
			key := t.Field(i).Tag.Get("koanf")
			if key == "" {
				key = strings.ToLower(t.Field(i).Name)
			}
			out = append(out, key)
		}
	}
	return out
}

// newConfigMetrics registers the configuration's generation and reload
// counters.
func (g *Gateway) newConfigMetrics() {
	g.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "iop_edge_config_reloads_total",
		Help: "Configuration reloads by result: applied or rejected (invalid; the running configuration stays).",
	}, []string{"result"})
	gen := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "iop_edge_config_generation",
		Help: "The running configuration's generation: 1 at start, +1 per applied reload.",
	}, func() float64 { return float64(g.gen.Load().n) })
	g.reg.MustRegister(g.reloads, gen)
}

// Config returns a copy of the running configuration.
func (g *Gateway) Config() Config { return *g.config() }

// ConfigGeneration is the running configuration's generation.
func (g *Gateway) ConfigGeneration() uint64 { return g.gen.Load().n }
