package cloud

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the requests sent to the cloud provider.
type Metrics struct {
	requests *prometheus.CounterVec
	retries  prometheus.Counter
}

// NewMetrics registers the cloud's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_cloud_requests_total",
			Help: "Requests sent to the cloud provider, retries included, by status class (2xx, 4xx, 5xx, error)."},
			[]string{"status"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "vera_cloud_retries_total", Help: "Cloud requests sent again after a 429 or 5xx."}),
	}
	reg.MustRegister(m.requests, m.retries)
	return m
}

// Observe counts one request to the provider (Provider.Observe): its
// status, 0 when none came, and whether it was a retry.
func (m *Metrics) Observe(status int, retry bool) {
	class := "error"
	if status > 0 {
		class = strconv.Itoa(status/100) + "xx"
	}
	m.requests.WithLabelValues(class).Inc()
	if retry {
		m.retries.Inc()
	}
}
