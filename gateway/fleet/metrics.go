package fleet

import "github.com/prometheus/client_golang/prometheus"

// hubMetrics are the hub's collectors. Labels are closed sets.
type hubMetrics struct {
	staleGeneration prometheus.Counter
	nodesConnected  prometheus.Gauge
	heartbeatDrops  prometheus.Counter
	dispatchFails   prometheus.Counter
	attemptStreams  *prometheus.CounterVec
	reparked        prometheus.Counter
	// attemptStreams' two series, looked up once (an attempt's open
	// counts one without hashing its label).
	parkedStreams, dispatchedStreams prometheus.Counter
}

// newHubMetrics registers the hub's collectors on reg.
func newHubMetrics(reg prometheus.Registerer) *hubMetrics {
	m := &hubMetrics{
		staleGeneration: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_stale_generation_messages_total",
			Help: "Node messages dropped because they named a stale connection generation."}),
		nodesConnected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "iop_edge_nodes_connected",
			Help: "Node connections currently registered."}),
		heartbeatDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_node_heartbeat_drops_total",
			Help: "Node sessions dropped because the node stopped answering heartbeats (frozen or partitioned)."}),
		dispatchFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_dispatch_failures_total",
			Help: "Dispatches a node did not open in time or could not take; each moved to another provider when one could serve."}),
		attemptStreams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_attempt_streams_total",
			Help: "Attempts sent to nodes, by how their stream was had: parked (opened ahead of work) or dispatched (opened on request)."}, []string{"kind"}),
		reparked: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_attempt_streams_reparked_total",
			Help: "Attempt streams parked again after their attempt finished, to carry the node's next attempt without opening a stream."}),
	}
	reg.MustRegister(m.staleGeneration, m.nodesConnected, m.heartbeatDrops, m.dispatchFails, m.attemptStreams, m.reparked)
	m.parkedStreams, m.dispatchedStreams = m.attemptStreams.WithLabelValues("parked"), m.attemptStreams.WithLabelValues("dispatched")
	return m
}
