package nodeagent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// linkMetrics show each configured edge's session: whether it is up, and
// why connecting failed. The edge label is the configured address (a
// bounded, operator-chosen set).
type linkMetrics struct {
	up       *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

func newLinkMetrics(reg prometheus.Registerer) (*linkMetrics, error) {
	m := &linkMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "iop_node_edge_session_up",
			Help: "1 while the node has a session with the edge (welcomed), else 0.",
		}, []string{"edge"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iop_node_edge_connect_failures_total",
			Help: "Failed attempts to open a session with the edge, by cause: refused, dns, tls, timeout, unauthenticated, rejected, other.",
		}, []string{"edge", "cause"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
