package gateway

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

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

	// The collectors of each route (and status class) seen, looked up
	// once: a lookup by label values checks and hashes them each time.
	routeDurations sync.Map // route → prometheus.Observer
	routeRequests  sync.Map // routeClass → prometheus.Counter
}

// routeClass is a route and a status class (code / 100).
type routeClass struct {
	route string
	class int
}

// durationOf is the duration histogram of route.
func (m *edgeMetrics) durationOf(route string) prometheus.Observer {
	if o, ok := m.routeDurations.Load(route); ok {
		return o.(prometheus.Observer)
	}
	o, _ := m.routeDurations.LoadOrStore(route, m.duration.WithLabelValues(route))
	return o.(prometheus.Observer)
}

// requestsOf is the request counter of route and status code.
func (m *edgeMetrics) requestsOf(route string, code int) prometheus.Counter {
	k := routeClass{route, code / 100}
	if c, ok := m.routeRequests.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.routeRequests.LoadOrStore(k, m.requests.WithLabelValues(route, strconv.Itoa(k.class)+"xx"))
	return c.(prometheus.Counter)
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
