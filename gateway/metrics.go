package gateway

import "github.com/prometheus/client_golang/prometheus"

// edgeMetrics are the edge's own collectors, registered on the gateway's
// registry. Labels are closed sets; no identifier is a label (the model
// label takes only models advertised by configured nodes).
type edgeMetrics struct {
	doubleRelease   prometheus.Counter
	queueRejected   *prometheus.CounterVec
	staleGeneration prometheus.Counter
	nodesConnected  prometheus.Gauge
	leasesInUse     prometheus.GaugeFunc
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	authFailures    prometheus.Counter
	// adminAuthFailures counts refused admin authentications by result
	// (invalid, throttled).
	adminAuthFailures *prometheus.CounterVec
	ejections         prometheus.Counter
	heartbeatDrops    prometheus.Counter
	dispatchFails     prometheus.Counter
	attemptStreams    *prometheus.CounterVec
}

func newEdgeMetrics(reg prometheus.Registerer, pool *Pool) *edgeMetrics {
	m := &edgeMetrics{
		doubleRelease: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_lease_double_release_total",
			Help: "Second releases of a lease (always refused; should stay 0)."}),
		queueRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_queue_rejected_total",
			Help: "Requests refused by a model queue, by reason (full, timeout)."}, []string{"reason"}),
		staleGeneration: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_stale_generation_messages_total",
			Help: "Node messages dropped because they named a stale connection generation."}),
		nodesConnected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "iop_edge_nodes_connected",
			Help: "Node connections currently registered."}),
		leasesInUse: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iop_edge_leases_in_use",
			Help: "Provider slots currently leased."}, func() float64 { return float64(pool.InUse()) }),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_http_requests_total",
			Help: "HTTP requests by route and status class."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "iop_edge_http_request_duration_seconds",
			Help:    "HTTP request duration by route (to the end of the body; streams included), with the trace id as exemplar when traced.",
			Buckets: []float64{.005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"route"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_auth_failures_total",
			Help: "Rejected client authentications."}),
		adminAuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_admin_auth_failures_total",
			Help: "Refused admin authentications (bearer, cookie or POST /admin/login), by result: invalid or throttled."}, []string{"result"}),
		ejections: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_outlier_ejections_total",
			Help: "Providers taken out of selection after consecutive server-side failures."}),
		heartbeatDrops: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_node_heartbeat_drops_total",
			Help: "Node sessions dropped because the node stopped answering heartbeats (frozen or partitioned)."}),
		dispatchFails: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_dispatch_failures_total",
			Help: "Dispatches a node did not open in time or could not take; each moved to another provider when one could serve."}),
		attemptStreams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_attempt_streams_total",
			Help: "Attempts sent to nodes, by how their stream was had: parked (opened ahead of work) or dispatched (opened on request)."}, []string{"kind"}),
	}
	reg.MustRegister(m.duration)
	reg.MustRegister(m.doubleRelease, m.queueRejected, m.staleGeneration, m.nodesConnected, m.leasesInUse, m.requests, m.authFailures, m.adminAuthFailures, m.ejections,
		m.heartbeatDrops, m.dispatchFails, m.attemptStreams)
	return m
}
