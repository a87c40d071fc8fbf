package tests

import (
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
)

// /metrics: Prometheus text, parsed with its parser; no token needed; the
// labels are bounded (route patterns, dialects, statuses), never a raw
// path, a namespace or a model name.
func TestMetrics(t *testing.T) {
	up := ollamatest.New(t)
	p := veratest.Start(t, "VERA_OLLAMA_URL="+up.URL, "VERA_ADMIN_TOKEN=admin-t")
	veratest.Chat(t, p, "alice-secret-ns", false, veratest.User("My sister lives in Lisbon."))
	res, err := http.Get("http://" + p.Addr + "/api/show-me-a-made-up-path")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, veratest.AdminCall(t, p, "Bearer admin-t", "POST", "/memories", `{"namespace":"alice-secret-ns","type":"rule","text":"Be brief."}`, nil))
	veratest.Settled(t, p)
	require.Equal(t, http.StatusOK, veratest.AdminCall(t, p, "Bearer admin-t", "POST", "/curator/run?dry_run=true", "", nil))
	up.Close() // Ollama goes away: the next chat's failure is counted
	resp, err := http.Post("http://"+p.Addr+"/api/chat", "application/json", strings.NewReader(`{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	families, body := scrape(t, p)
	for _, name := range []string{"vera_requests_total", "vera_request_duration_seconds", "vera_recall_seconds", "vera_injected_tokens",
		"vera_queue_depth", "vera_queue_oldest_age_seconds", "vera_upstream_duration_seconds", "vera_stream_first_byte_seconds",
		"vera_memories", "vera_curator_runs_total", "go_goroutines", "process_resident_memory_bytes"} {
		assert.Contains(t, families, name)
	}
	assert.EqualValues(t, 1, metricValue(families, "vera_memories", map[string]string{"type": "rule"}))
	assert.EqualValues(t, 1, metricValue(families, "vera_memories", map[string]string{"type": "raw"}))
	assert.EqualValues(t, 0, metricValue(families, "vera_queue_depth", nil))
	assert.EqualValues(t, 1, metricValue(families, "vera_curator_runs_total", map[string]string{"status": "ok", "dry_run": "true"}))
	assert.EqualValues(t, 1, metricValue(families, "vera_stream_first_byte_seconds", map[string]string{"dialect": "ollama-chat"}), "the streamed chat")
	assert.GreaterOrEqual(t, metricValue(families, "vera_upstream_duration_seconds", map[string]string{"upstream": "ollama", "status": "200"}), 1.0)
	assert.EqualValues(t, 1, metricValue(families, "vera_upstream_errors_total", map[string]string{"upstream": "ollama", "reason": "unreachable"}))
	found := false
	for _, m := range families["vera_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["route"] == "/api/chat" && labels["dialect"] == "ollama-chat" && labels["status"] == "200" {
			found = true
		}
	}
	assert.True(t, found, "the chat is counted by its route pattern")
	assert.EqualValues(t, 2, families["vera_recall_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(), "both chats recalled")
	assert.NotContains(t, body, "alice-secret-ns")
	assert.NotContains(t, body, "made-up-path")
	assert.NotContains(t, body, "llama3.2")
}

// scrape reads /metrics with the Prometheus text parser.
func scrape(t *testing.T, p *veratest.InProcess) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	res, err := http.Get("http://" + p.Addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	body, _ := io.ReadAll(res.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	return families, string(body)
}

// metricValue is the value of the family's series whose labels include
// want (a histogram's sample count), or -1 when there is none.
func metricValue(families map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}
