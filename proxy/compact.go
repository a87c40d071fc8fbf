package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory/conversation"
)

// compact has the summary a chat's conversation is due written, in the
// background, once its answer went out (conversation.Set.Compact): by
// the conversation's own model, through the upstream that answered it.
func (pl *pipeline) compact(log *slog.Logger, ch *chat) {
	if ch.turn == nil || ch.plan.up.url == nil {
		return
	}
	pl.convs.Compact(log.With(slog.String("model", ch.plan.model)), ch.turn, summarizer{fw: pl.fw, plan: ch.plan})
}

// summarizer asks a plan's model for a summary, as a non-streamed
// /api/chat (the cloud translates it as any chat), within the plan's
// window.
type summarizer struct {
	fw   *forwarder
	plan plan
}

var _ conversation.Summarizer = summarizer{}

func (s summarizer) Summarize(ctx context.Context, prompt string) (string, error) {
	p := s.plan
	body := map[string]any{"model": p.model, "stream": false,
		"messages": []map[string]string{{"role": "user", "content": prompt}}}
	if p.window > 0 && !p.cloud {
		body["options"] = map[string]int{"num_ctx": p.window}
	}
	b, err := dialect.Marshal(body)
	if err != nil {
		return "", err
	}
	u := *p.up.url
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/chat"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	s.fw.outbound(req, p.up)
	res, err := s.fw.timed(p.up).RoundTrip(req)
	if err != nil {
		return "", upstreamError(ctx, p.up.url.String(), err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading the summary: %w", err)
	}
	var out struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &out) != nil {
		return "", fmt.Errorf("the summary's answer is not Ollama's JSON (status %d)", res.StatusCode)
	}
	if res.StatusCode != http.StatusOK || out.Error != "" {
		return "", fmt.Errorf("the model answered %d: %s", res.StatusCode, out.Error)
	}
	return dialect.StripThink(out.Message.Content), nil
}
