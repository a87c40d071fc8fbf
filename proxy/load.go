package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/vera-proxy/vera/dialect"
)

// answerLoadLocally answers a load or unload call for a cloud name or a
// virtual name as Ollama answers one (`ollama run` preloads, `ollama
// stop` unloads): nothing to load, nothing is asked of the cloud. It
// reports whether it answered.
func (pl *pipeline) answerLoadLocally(w http.ResponseWriter, ch *chat) bool {
	if !ch.untouched || (!pl.catalog.cloudModel(ch.req.ModelName()) && !pl.catalog.virtual(ch.req.ModelName())) {
		return false
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	reason := "load"
	var keepAlive struct {
		KeepAlive json.RawMessage `json:"keep_alive"`
	}
	_ = json.Unmarshal(ch.body, &keepAlive)
	if k := strings.Trim(string(keepAlive.KeepAlive), `" `); k == "0" || k == "0s" {
		reason = "unload"
	}
	answer, ok := dialect.LoadAnswer(ch.req, reason, now)
	if !ok {
		return false
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return false // never: the answer is vera's own
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return true
}
