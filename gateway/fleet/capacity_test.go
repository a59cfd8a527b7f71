package fleet

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/iopgw/iop/gateway/pool"
	"github.com/iopgw/iop/internal/testing/logbuf"
	"github.com/iopgw/iop/internal/testing/wait"
	"github.com/iopgw/iop/wire"
)

// TestClampedCapacityIsNeverSilent (issue 28): a provider advertising
// more capacity than node_limits.max_capacity gets the limit, and says so:
// a warning naming both numbers, and advertised_capacity beside the
// effective one in the provider snapshot (/admin/providers, the status
// page, iop status). A provider within the limit shows no such note.
func TestClampedCapacityIsNeverSilent(t *testing.T) {
	e := startHub(t, NodeConfig{ID: "n", Token: "tok"})
	logs := &logbuf.Buffer{}
	e.hub.log = slog.New(slog.NewJSONHandler(logs, nil))
	e.hub.limits.MaxCapacity = 1024
	big := &wire.ProviderAdvertisement{ProviderId: "big", Adapter: "sim", Target: "m", Models: []string{"m"}, Capacity: 4096}
	small := &wire.ProviderAdvertisement{ProviderId: "small", Adapter: "sim", Target: "m", Models: []string{"m"}, Capacity: 8}
	if _, _, err := session(t, t.Context(), e.client(t), "tok", "n", big, small); err != nil {
		t.Fatal(err)
	}
	// The welcome goes out before the pool and the log learn of the
	// providers: wait for both.
	got := map[string]pool.ProviderSnapshot{}
	wait.Until(t, func() bool {
		for _, s := range e.pool.Snapshot() {
			got[s.LocalProviderID] = s
		}
		return len(got) == 2 && got["big"].AdvertisedCapacity != 0 && strings.Contains(logs.String(), "node_limits.max_capacity")
	})
	if b := got["big"]; b.ConfiguredCapacity != 1024 || b.EffectiveCapacity != 1024 || b.AdvertisedCapacity != 4096 {
		t.Fatalf("the clamped provider: %+v", b)
	}
	if s := got["small"]; s.ConfiguredCapacity != 8 || s.AdvertisedCapacity != 0 {
		t.Fatalf("a provider within the limit: %+v", s)
	}
	line := logs.String()
	if !strings.Contains(line, "node_limits.max_capacity") || !strings.Contains(line, `"advertised_capacity":4096`) ||
		!strings.Contains(line, `"effective_capacity":1024`) {
		t.Fatalf("no warning naming both numbers:\n%s", line)
	}
}
