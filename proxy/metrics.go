package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vera-proxy/vera/dialect"
)

// Metrics are the proxy's Prometheus metrics. Labels are
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
	upstream       *prometheus.HistogramVec
	upstreamErrors *prometheus.CounterVec
	firstByte      *prometheus.HistogramVec
	overflows      *prometheus.CounterVec
	withheld       *prometheus.CounterVec
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
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vera_upstream_duration_seconds",
			Help:    "Time from forwarding a request to the upstream's response headers, by upstream (ollama, cloud) and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 11)}, []string{"upstream", "status"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_upstream_errors_total",
			Help: "Requests the upstream did not answer, by upstream and reason (unreachable, timeout, canceled, other)."},
			[]string{"upstream", "reason"}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vera_stream_first_byte_seconds",
			Help:    "Time from a streamed request's arrival to the first byte of its answer, by dialect.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"dialect"}),
		overflows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_window_overflows_total",
			Help: "Prompts vera sent that the model's answer shows were cut by its window, by model (one that answered: a real one)."},
			[]string{"model"}),
		withheld: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vera_memories_withheld_total",
			Help: "Private memories a model's policy kept out of its chats, by model (a cloud name or a [memory.models] pattern's; \"other\" for any else)."},
			[]string{"model"}),
	}
	reg.MustRegister(m.requests, m.duration, m.recall, m.injected, m.tiers, m.vramFlushes, m.fallbacks,
		m.upstream, m.upstreamErrors, m.firstByte, m.overflows, m.withheld)
	return m
}

// request counts one request; route is gin's pattern ("" for routes vera
// does not own, which count as "ollama").
func (m *Metrics) request(route string, d dialect.Dialect, status int, took time.Duration) {
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

// keptBack counts n private memories kept out of a chat for model.
func (m *Metrics) keptBack(model string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.withheld.WithLabelValues(model).Add(float64(n))
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

// streamStarted observes a stream's time to first byte.
func (m *Metrics) streamStarted(d dialect.Dialect, took time.Duration) {
	if m != nil {
		m.firstByte.WithLabelValues(d.String()).Observe(took.Seconds())
	}
}

// timedTransport measures the upstream behind it: the time to response
// headers by status, and the errors by reason; nil metrics: none.
type timedTransport struct {
	metrics *Metrics
	name    string // "ollama" or "cloud": a bounded label
	next    http.RoundTripper
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	m := t.metrics
	if m == nil {
		return t.next.RoundTrip(r)
	}
	start := time.Now()
	res, err := t.next.RoundTrip(r)
	if err != nil {
		m.upstreamErrors.WithLabelValues(t.name, errorReason(r, err)).Inc()
		return res, err
	}
	m.upstream.WithLabelValues(t.name, strconv.Itoa(res.StatusCode)).Observe(time.Since(start).Seconds())
	return res, nil
}

// errorReason names why an upstream request failed, from a short list.
func errorReason(r *http.Request, err error) string {
	var ne net.Error
	var op *net.OpError
	switch {
	case r.Context().Err() != nil || errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &op) && op.Op == "dial", errors.As(err, new(*net.DNSError)):
		return "unreachable"
	}
	return "other"
}

// Overflowed counts a prompt of model that its window cut.
func (m *Metrics) Overflowed(model string) {
	if m == nil {
		return
	}
	m.overflows.WithLabelValues(model).Inc()
}
