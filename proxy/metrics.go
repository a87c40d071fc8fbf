package proxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's Prometheus metrics (SPEC §3, §6). Labels are
// bounded: route patterns, dialects, tiers, statuses; never a raw path, a
// namespace or a model name a client made up.
type Metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	recall         prometheus.Histogram
	injected       *prometheus.HistogramVec
	tiers          *prometheus.CounterVec
	vramFlushes    *prometheus.CounterVec
	fallbacks      prometheus.Counter
	upstreamErrors *prometheus.CounterVec
}

// NewMetrics registers the proxy's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_requests_total", Help: "Requests by route pattern, dialect and status."},
			[]string{"route", "dialect", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vera_request_duration_seconds", Help: "Request latency by route pattern (to the end of the answer).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"route"}),
		recall: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vera_recall_seconds", Help: "Time to choose a chat's memory layers.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9)}),
		injected: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vera_injected_tokens", Help: "Tokens of memory injected per chat, by layer.",
			Buckets: prometheus.ExponentialBuckets(16, 2, 10)}, []string{"layer"}),
		tiers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_tier_decisions_total", Help: "Tier routing decisions by tier and by what decided."},
			[]string{"tier", "by"}),
		vramFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_vram_flushes_total", Help: "VRAM flushes before large models, by outcome."},
			[]string{"outcome"}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "vera_cloud_fallbacks_total", Help: "Chats for local models sent to the fallback cloud model."}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_upstream_errors_total", Help: "Chats the upstream could not answer, by dialect."},
			[]string{"dialect"}),
	}
	reg.MustRegister(m.requests, m.duration, m.recall, m.injected, m.tiers, m.vramFlushes, m.fallbacks, m.upstreamErrors)
	return m
}

// request counts one request; route is gin's pattern ("" for routes vera
// does not own, which count as "ollama").
func (m *Metrics) request(route string, d dialect, status int, took time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "ollama"
	}
	m.requests.WithLabelValues(route, d.String(), strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}

func (m *Metrics) recalled(took time.Duration, semantic, recent, rules int) {
	if m == nil {
		return
	}
	m.recall.Observe(took.Seconds())
	m.injected.WithLabelValues("semantic").Observe(float64(semantic))
	m.injected.WithLabelValues("recent").Observe(float64(recent))
	m.injected.WithLabelValues("rules").Observe(float64(rules))
}

func (m *Metrics) routed(tier, by string) {
	if m != nil {
		m.tiers.WithLabelValues(tier, by).Inc()
	}
}

func (m *Metrics) flushed(outcome string) {
	if m != nil {
		m.vramFlushes.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) fellBack() {
	if m != nil {
		m.fallbacks.Inc()
	}
}
