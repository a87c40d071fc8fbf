package curator

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the curator's runs and what they changed. Labels are
// statuses, modes and kinds of change: never a namespace.
type Metrics struct {
	runs    *prometheus.CounterVec
	changes *prometheus.CounterVec
}

// NewMetrics registers the curator's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_curator_runs_total",
			Help: "Curator runs by status (ok, error, busy), mode (daily, monthly) and whether they were dry."},
			[]string{"status", "mode", "dry_run"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_curator_changes_total",
			Help: "What curator runs (not dry) did: memories curated, deleted, rules learnt; and raw turns processed."},
			[]string{"change"}),
	}
	reg.MustRegister(m.runs, m.changes)
	return m
}

// Observe counts a run (Curator.Observe).
func (m *Metrics) Observe(res Result) {
	dry := "false"
	if res.DryRun {
		dry = "true"
	}
	m.runs.WithLabelValues(string(res.Status), res.Mode, dry).Inc()
	if res.DryRun {
		return
	}
	for change, n := range map[string]int{"processed": res.Processed, "curated": res.Curated, "deleted": res.Deleted, "rules": res.Rules} {
		m.changes.WithLabelValues(change).Add(float64(n))
	}
}
