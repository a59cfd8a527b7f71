package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/iopgw/iop/gateway"
	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/nodeagent"
)

// TestFailoverMatrix is issue 29's scenario table: provider faults ×
// {one provider per model, one provider serving every model, two
// providers for the primary} × {defaults, first-token timeout, first-token
// timeout + resume}, through real HTTP (curl's view), with walls that
// declare no prefill (so resume splices). Every cell asserts what the
// client got — the whole answer exactly once, or a prefix and a typed
// terminal — and the time it took.
func TestFailoverMatrix(t *testing.T) {
	const full = "Hello world from the wall."
	ftt := 300 * time.Millisecond
	settings := []struct {
		name string
		gw   func(*gateway.Config)
	}{
		{"defaults", nil},
		{"first-token timeout", func(g *gateway.Config) { g.Retry.FirstTokenTimeout = &ftt }},
		{"first-token timeout + resume", func(g *gateway.Config) {
			on := true
			g.Retry.FirstTokenTimeout, g.Retry.Resume = &ftt, &on
		}},
	}
	faults := []struct {
		fault string
		// what the client gets under each setting: "" the whole answer,
		// else the typed terminal's code after a prefix
		want [3]string
		max  [3]time.Duration // bound on the time to the end
	}{
		{"500-once", [3]string{}, [3]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"503-persist", [3]string{}, [3]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"ctx-length-400", [3]string{}, [3]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"reset-before-headers", [3]string{}, [3]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"accept-silent", [3]string{}, [3]time.Duration{3 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"slow-ttft-3s", [3]string{}, [3]time.Duration{5 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"cut-after-3", [3]string{"upstream_error", "upstream_error", ""}, [3]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"stall-after-3", [3]string{"response_stalled", "response_stalled", ""}, [3]time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
	}
	for _, config := range []string{"one provider per model", "one provider for every model", "two providers for the primary"} {
		for si, setting := range settings {
			for _, f := range faults {
				t.Run(config+"/"+setting.name+"/"+f.fault, func(t *testing.T) {
					c, model := matrixCluster(t, config, f.fault, setting.gw)
					got := curlStream(t, c.URL, model)
					t.Logf("| %s | %s | %s | %v |", config, setting.name, f.fault, got)
					switch want := f.want[si]; {
					case want == "" && (got.status != 200 || !got.done || got.code != "" || got.text != full):
						t.Errorf("want the whole answer once, got %v", got)
					case want != "" && (got.code != want || got.done || !strings.HasPrefix(full, got.text) || got.text == ""):
						t.Errorf("want a prefix and %s, got %v", want, got)
					}
					if got.took > f.max[si] {
						t.Errorf("took %v, want at most %v", got.took, f.max[si])
					}
				})
			}
		}
	}
}

// matrixCluster starts one configuration of the matrix with fault on the
// primary, and returns it with the model to ask for.
func matrixCluster(t *testing.T, config, fault string, gw func(*gateway.Config)) (*Cluster, string) {
	no := false
	model := "primary"
	c := Start(t, Options{Gateway: func(g *gateway.Config) {
		g.Models = []gateway.ModelConfig{{Name: "primary", Fallbacks: []string{"backup"}}}
		if config == "one provider for every model" {
			g.Models, model = []gateway.ModelConfig{{Name: fault, Fallbacks: []string{"ok"}}}, fault
		}
		if config == "two providers for the primary" {
			g.Providers = []pool.ProviderPolicy{{ID: "n/p1", Priority: 10}}
		}
		fastRetry(g)
		if gw != nil {
			gw(g)
		}
	}}, func(c *Cluster) []NodeSpec {
		mk := func(id, url string, models ...string) nodeagent.ProviderConfig {
			return nodeagent.ProviderConfig{ID: id, Adapter: "openai", BaseURL: url + "/v1", Models: models, Capacity: 8,
				ResponseStallTimeoutMS: 400, Prefill: &no}
		}
		var ps []nodeagent.ProviderConfig
		switch config {
		case "one provider for every model":
			c.Wall.Models = []string{fault, "ok"} // its probe finds both
			ps = append(ps, mk("w", c.WallURL, fault, "ok"))
		case "two providers for the primary":
			w1, u1 := c.AddWall(t, fault)
			_, u2 := c.AddWall(t, "")
			_, ub := c.AddWall(t, "")
			w1.Models = []string{"primary"}
			ps = append(ps, mk("p1", u1, "primary"), mk("p2", u2, "primary"), mk("b", ub, "backup"))
		default:
			wp, up := c.AddWall(t, fault)
			_, ub := c.AddWall(t, "")
			wp.Models = []string{"primary"}
			ps = append(ps, mk("p", up, "primary"), mk("b", ub, "backup"))
		}
		return []NodeSpec{{ID: "n", Providers: ps, Configure: func(n *nodeagent.Config) { n.Liveness.CloseGrace = 100 * time.Millisecond }}}
	})
	return c, model
}
