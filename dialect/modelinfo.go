package dialect

import "encoding/json"

// The context window and the Modelfile SYSTEM of a request's model come
// from ollama.ModelInfo (Server.windows); only what the request itself says
// is read here.

// requestOptions reads what the builder needs from a request's options.
func requestOptions(extra map[string]json.RawMessage) (numCtx, numPredict int) {
	var o struct {
		NumCtx     int `json:"num_ctx"`
		NumPredict int `json:"num_predict"`
	}
	if raw, ok := extra["options"]; ok {
		_ = json.Unmarshal(raw, &o)
	}
	return o.NumCtx, o.NumPredict
}
