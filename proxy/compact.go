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

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// compact has the summary a chat's conversation is due written, in the
// background, once its answer went out (conversation.Set.Compact): by
// the conversation's own model, through the upstream that answered it.
func (s *Server) compact(c *gin.Context, ch *chat) {
	if ch.turn == nil || s.convs == nil || ch.plan.up.url == nil {
		return
	}
	id := slog.String("request_id", c.GetString(requestIDKey))
	p := ch.plan
	s.convs.Compact(ch.turn, conversation.Summarizer{
		Summarize: func(ctx context.Context, prompt string) (string, error) { return s.summarize(ctx, p, prompt) },
		Failed: func(err error) {
			s.log.Warn("a long conversation's summary failed; it is asked for again at its next turn", slog.String("model", p.model), slog.Any("error", err), id)
		},
		Done: func(turns int) {
			s.log.Debug("a long conversation was summarised", slog.String("model", p.model), slog.Int("turns", turns), id)
		},
	})
}

// summarize asks plan's model for a summary, as a non-streamed /api/chat
// (the cloud translates it as any chat), within the plan's window.
func (s *Server) summarize(ctx context.Context, p plan, prompt string) (string, error) {
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
	s.outbound(req, p.up)
	res, err := s.timed(p.up).RoundTrip(req)
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
