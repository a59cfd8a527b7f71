package pool

import "github.com/prometheus/client_golang/prometheus"

// poolMetrics are the pool's own collectors. Labels are closed sets.
type poolMetrics struct {
	doubleRelease prometheus.Counter
	queueRejected *prometheus.CounterVec
	ejections     prometheus.Counter
}

// newPoolMetrics registers p's collectors on reg.
func newPoolMetrics(reg prometheus.Registerer, p *Pool) *poolMetrics {
	m := &poolMetrics{
		doubleRelease: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_lease_double_release_total",
			Help: "Second releases of a lease (always refused; should stay 0)."}),
		queueRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iop_edge_queue_rejected_total",
			Help: "Requests refused by a model queue, by reason (full, timeout)."}, []string{"reason"}),
		ejections: prometheus.NewCounter(prometheus.CounterOpts{Name: "iop_edge_outlier_ejections_total",
			Help: "Providers taken out of selection after consecutive server-side failures."}),
	}
	inUse := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "iop_edge_leases_in_use",
		Help: "Provider slots currently leased."}, func() float64 { return float64(p.InUse()) })
	reg.MustRegister(m.doubleRelease, m.queueRejected, m.ejections, inUse)
	return m
}
