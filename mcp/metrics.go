package mcp

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the MCP tool calls by tool and status (ok, error).
type Metrics struct {
	calls *prometheus.CounterVec
}

// NewMetrics registers the MCP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_mcp_calls_total",
		Help: "MCP tool calls by tool and status (ok, error)."}, []string{"tool", "status"})}
	reg.MustRegister(m.calls)
	return m
}

func (m *Metrics) called(tool, status string) {
	if m != nil {
		m.calls.WithLabelValues(tool, status).Inc()
	}
}
