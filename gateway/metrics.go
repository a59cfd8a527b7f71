package gateway

import "github.com/prometheus/client_golang/prometheus"

// edgeMetrics are the edge's own collectors, registered on the gateway's
// registry. Labels are closed sets; no identifier is a label (the model
// label takes only models advertised by configured nodes).
type edgeMetrics struct {
	staleGeneration prometheus.Counter
	nodesConnected  prometheus.Gauge
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	authFailures    prometheus.Counter
	// adminAuthFailures counts refused admin authentications by result
	// (invalid, throttled).
	adminAuthFailures *prometheus.CounterVec
	heartbeatDrops    prometheus.Counter
	dispatchFails     prometheus.Counter
	attemptStreams    *prometheus.CounterVec
}

func newEdgeMetrics(reg prometheus.Registerer) *edgeMetrics {
	m := &edgeMetrics{
		staleGeneration: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_stale_generation_messages_total",
			Help: "Node messages dropped because they named a stale connection generation."}),
		nodesConnected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "iop_edge_nodes_connected",
			Help: "Node connections currently registered."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_http_requests_total",
			Help: "HTTP requests by route and status class."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "iop_edge_http_request_duration_seconds",
			Help:    "HTTP request duration by route (to the end of the body; streams included), with the trace id as exemplar when traced.",
			Buckets: []float64{.005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"route"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_auth_failures_total",
			Help: "Rejected client authentications."}),
		adminAuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_admin_auth_failures_total",
			Help: "Refused admin authentications (bearer, cookie or POST /admin/login), by result: invalid or throttled."}, []string{"result"}),
		heartbeatDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_node_heartbeat_drops_total",
			Help: "Node sessions dropped because the node stopped answering heartbeats (frozen or partitioned)."}),
		dispatchFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_dispatch_failures_total",
			Help: "Dispatches a node did not open in time or could not take; each moved to another provider when one could serve."}),
		attemptStreams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_attempt_streams_total",
			Help: "Attempts sent to nodes, by how their stream was had: parked (opened ahead of work) or dispatched (opened on request)."}, []string{"kind"}),
	}
	reg.MustRegister(m.duration)
	reg.MustRegister(m.staleGeneration, m.nodesConnected, m.requests, m.authFailures, m.adminAuthFailures,
		m.heartbeatDrops, m.dispatchFails, m.attemptStreams)
	return m
}
