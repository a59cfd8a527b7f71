package gateway

import "github.com/prometheus/client_golang/prometheus"

// edgeMetrics are the edge's own collectors, registered on the gateway's
// registry. Labels are closed sets; no identifier is a label (the model
// label takes only models advertised by configured nodes).
type edgeMetrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authFailures prometheus.Counter
	// adminAuthFailures counts refused admin authentications by result
	// (invalid, throttled).
	adminAuthFailures *prometheus.CounterVec
}

func newEdgeMetrics(reg prometheus.Registerer) *edgeMetrics {
	m := &edgeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_http_requests_total",
			Help: "HTTP requests by route and status class."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "iop_edge_http_request_duration_seconds",
			Help:    "HTTP request duration by route (to the end of the body; streams included), with the trace id as exemplar when traced.",
			Buckets: []float64{.005, .025, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"route"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_auth_failures_total",
			Help: "Rejected client authentications."}),
		adminAuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_admin_auth_failures_total",
			Help: "Refused admin authentications (bearer, cookie or POST /admin/login), by result: invalid or throttled."}, []string{"result"}),
	}
	reg.MustRegister(m.duration, m.requests, m.authFailures, m.adminAuthFailures)
	return m
}
