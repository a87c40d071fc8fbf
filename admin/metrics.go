package admin

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vera-proxy/vera/memory"
)

// RegisterStore registers the memory side of /metrics on reg: the store's
// memories per type and the durable queue (its depth and the age of its
// oldest turn), read when /metrics is scraped, at most every 30 seconds.
// Labels are types: never a namespace.
func RegisterStore(reg prometheus.Registerer, store memory.Store, queue memory.Queue) {
	reg.MustRegister(&storeCollector{store: store, queue: queue,
		memoriesDesc: prometheus.NewDesc("vera_memories", "Memories in the store by type.", []string{"type"}, nil),
		depthDesc:    prometheus.NewDesc("vera_queue_depth", "Turns committed to the durable queue, not yet in the store.", nil, nil),
		oldestDesc:   prometheus.NewDesc("vera_queue_oldest_age_seconds", "Age of the oldest turn waiting in the durable queue; 0 when it is empty.", nil, nil),
		scrapeDesc:   prometheus.NewDesc("vera_store_scrape_ok", "1 when the last count of the store and the queue succeeded.", nil, nil),
	})
}

// storeCollector counts the store and the queue when scraped, and keeps
// the figures for a while: counting every namespace of a large store on
// every scrape would cost more than it tells.
type storeCollector struct {
	store memory.Store
	queue memory.Queue

	memoriesDesc, depthDesc, oldestDesc, scrapeDesc *prometheus.Desc

	mu      sync.Mutex
	at      time.Time
	metrics []prometheus.Metric
}

// storeScrapeEvery is how long counted figures are served again.
const storeScrapeEvery = 30 * time.Second

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.memoriesDesc, c.depthDesc, c.oldestDesc, c.scrapeDesc} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.metrics == nil || time.Since(c.at) > storeScrapeEvery {
		c.metrics, c.at = c.count(), time.Now()
	}
	for _, m := range c.metrics {
		ch <- m
	}
}

// count reads the figures, within 5 seconds.
func (c *storeCollector) count() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok := 1.0
	var out []prometheus.Metric
	if c.store != nil {
		byType := map[memory.Type]int{memory.Raw: 0, memory.Curated: 0, memory.Rule: 0, memory.Profile: 0, memory.Forgotten: 0}
		spaces, err := c.store.Namespaces(ctx)
		for _, ns := range spaces {
			for t := range byType {
				n, cerr := c.store.Count(ctx, memory.Filter{Namespace: ns, Types: []memory.Type{t}})
				if cerr != nil {
					err = cerr
				}
				byType[t] += n
			}
		}
		if err != nil {
			ok = 0
		} else {
			for t, n := range byType {
				out = append(out, prometheus.MustNewConstMetric(c.memoriesDesc, prometheus.GaugeValue, float64(n), string(t)))
			}
		}
	}
	if c.queue != nil {
		depth, err := c.queue.Len(ctx)
		oldest, perr := c.queue.Pending(ctx, 1)
		if err != nil || perr != nil {
			ok = 0
		} else {
			age := 0.0
			if len(oldest) == 1 && !oldest[0].Time.IsZero() {
				age = max(time.Since(oldest[0].Time).Seconds(), 0)
			}
			out = append(out,
				prometheus.MustNewConstMetric(c.depthDesc, prometheus.GaugeValue, float64(depth)),
				prometheus.MustNewConstMetric(c.oldestDesc, prometheus.GaugeValue, age))
		}
	}
	return append(out, prometheus.MustNewConstMetric(c.scrapeDesc, prometheus.GaugeValue, ok))
}
