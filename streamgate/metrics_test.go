package streamgate

import "github.com/prometheus/client_golang/prometheus"

// testMetrics is the collectors every test runtime counts on (tests read
// their deltas).
var testMetrics = func() *Metrics {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		panic(err)
	}
	return m
}()
