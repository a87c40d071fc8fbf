package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/curator"
	"github.com/vera-proxy/vera/memory"
)

// withUsage adds their usage to ms.
func (s *Server) withUsage(ctx context.Context, ms []memory.JSON) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	uses := s.Memories.Usage.Of(ctx, ids...)
	for i := range ms {
		if u, ok := uses[ms[i].ID]; ok && u.Count > 0 {
			last := u.Last
			ms[i].UsedCount, ms[i].LastUsed = u.Count, &last
		}
	}
}

// mountMemories registers the memory routes, guarded.
func (s *Server) mountMemories(e *gin.Engine) {
	if s.Memories == nil {
		return
	}
	e.GET("/memories", s.guard, handle(s.listMemories))
	e.GET("/memories/export", s.guard, handle(s.exportMemories))
	e.POST("/memories/import", s.guard, handle(s.importMemories))
	e.GET("/memories/:id", s.guard, handle(s.getMemory))
	e.POST("/memories", s.guard, handle(s.addMemory))
	e.PATCH("/memories/:id", s.guard, handle(s.editMemory))
	e.POST("/memories/:id/restore", s.guard, handle(s.restoreMemory))
	e.DELETE("/memories/:id", s.guard, handle(s.deleteMemory))
	e.DELETE("/memories", s.guard, handle(s.forgetNamespace))
	e.GET("/namespaces", s.guard, handle(s.listNamespaces))
	e.DELETE("/namespaces/:ns", s.guard, handle(s.eraseNamespaceRoute))
	s.mountHistory(e)
}

// filterOf reads namespace, type, since and until.
func filterOf(c *gin.Context) (memory.Filter, error) {
	f := memory.Filter{Namespace: strings.TrimSpace(c.Query("namespace"))}
	if f.Namespace == "" {
		return f, httpError(http.StatusBadRequest, "namespace is required: /memories?namespace=NS")
	}
	if t := c.Query("type"); t != "" {
		if !memory.Type(t).Valid() {
			return f, httpError(http.StatusBadRequest, fmt.Sprintf("type %q is not raw, curated, rule, profile or forgotten", t))
		}
		f.Types = []memory.Type{memory.Type(t)}
	}
	for key, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := c.Query(key); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, httpError(http.StatusBadRequest, fmt.Sprintf("%s: %q is not an RFC 3339 time such as 2026-11-22T10:00:00Z", key, v))
			}
			*dst = t
		}
	}
	return f, nil
}

// listMemories serves GET /memories: newest first (order=oldest: oldest
// first), equal times by id, a page at a time; with q=, the best hits of
// a search instead, by relevance, in one page.
func (s *Server) listMemories(c *gin.Context) error {
	f, err := filterOf(c)
	if err != nil {
		return err
	}
	order := memory.NewestFirst
	switch v := c.Query("order"); v {
	case "", "newest":
	case "oldest":
		order = memory.OldestFirst
	default:
		return httpError(http.StatusBadRequest, fmt.Sprintf("order: %q is neither newest (the default) nor oldest", v))
	}
	limit := 50
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return httpError(http.StatusBadRequest, "limit: want a number from 1 to 1000")
		}
	}
	// ?private=true|false keeps the private memories, or the others.
	keep := func(memory.Memory) bool { return true }
	switch v := c.Query("private"); v {
	case "":
	case "true", "false":
		want := v == "true"
		keep = func(m memory.Memory) bool { return memory.IsPrivate(m) == want }
	default:
		return httpError(http.StatusBadRequest, "private: want true or false")
	}
	ctx := c.Request.Context()
	out := []memory.JSON{}
	if q := strings.TrimSpace(c.Query("q")); q != "" {
		// The same hybrid search chats use, scored; with a filter, from
		// more hits, that the page still fills.
		want := limit
		if c.Query("private") != "" {
			want = min(limit*4, 1000)
		}
		hits, err := s.Memories.Search(ctx, f, q, want)
		if err != nil {
			return httpError(http.StatusServiceUnavailable, "searching the store: "+err.Error())
		}
		for _, h := range hits {
			if !keep(h.Memory) || len(out) == limit {
				continue
			}
			m := memory.JSONOf(h.Memory)
			score := h.Score
			m.Score = &score
			out = append(out, m)
		}
		s.withUsage(ctx, out)
		c.JSON(http.StatusOK, gin.H{"memories": out, "next_cursor": ""})
		return nil
	}
	// Pages on until the page is full or the store ends: a filter may
	// keep few of each.
	next := c.Query("cursor")
	for {
		page, after, err := s.Memories.Store.List(ctx, f, order, next, limit-len(out))
		if errors.Is(err, memory.ErrBadCursor) {
			return httpError(http.StatusBadRequest, fmt.Sprintf("cursor: not a next_cursor GET /memories gave with order=%s", order))
		}
		if err != nil {
			return httpError(http.StatusServiceUnavailable, "reading the store: "+err.Error())
		}
		for _, m := range page {
			if keep(m) {
				out = append(out, memory.JSONOf(m))
			}
		}
		next = after
		if next == "" || len(out) >= limit {
			break
		}
	}
	s.withUsage(ctx, out)
	c.JSON(http.StatusOK, gin.H{"memories": out, "next_cursor": next})
	return nil
}

// lookup reads the memory a route names. With ?namespace=NS, a memory of
// another namespace is not found: a caller scoped to one namespace never
// learns of another's.
func (s *Server) lookup(c *gin.Context) (memory.Memory, error) {
	id := c.Param("id")
	m, err := s.Memories.Store.Get(c.Request.Context(), id)
	if errors.Is(err, memory.ErrNotFound) {
		return m, httpError(http.StatusNotFound, fmt.Sprintf("no memory %q", id))
	}
	if err != nil {
		return m, httpError(http.StatusServiceUnavailable, "reading the store: "+err.Error())
	}
	if ns := strings.TrimSpace(c.Query("namespace")); ns != "" && ns != m.Namespace {
		return memory.Memory{}, httpError(http.StatusNotFound, fmt.Sprintf("no memory %q in namespace %q", id, ns))
	}
	return m, nil
}

func (s *Server) getMemory(c *gin.Context) error {
	m, err := s.lookup(c)
	if err != nil {
		return err
	}
	out := []memory.JSON{memory.JSONOf(m)}
	s.withUsage(c.Request.Context(), out)
	c.JSON(http.StatusOK, out[0])
	return nil
}

func (s *Server) addMemory(c *gin.Context) error {
	var in memory.JSON
	if err := json.NewDecoder(c.Request.Body).Decode(&in); err != nil {
		return httpError(http.StatusBadRequest, "the body is not a MEMORY: "+jsonProblem(err))
	}
	if in.Type == "" {
		in.Type = memory.Curated
	}
	if in.Type != memory.Curated && in.Type != memory.Rule && in.Type != memory.Profile {
		return httpError(http.StatusBadRequest, "type: a memory added by hand is curated, a rule or a profile")
	}
	m := memory.Memory{ID: memory.NewID(), Namespace: strings.TrimSpace(in.Namespace), Type: in.Type, Text: strings.TrimSpace(in.Text), Time: time.Now().UTC(), Model: in.Model, Metadata: in.Metadata}
	if m.Namespace == "" || m.Text == "" {
		return httpError(http.StatusBadRequest, "namespace and text are required")
	}
	if m.Type == memory.Profile {
		byHand(&m)
	}
	if v, ok := m.Metadata[memory.MetaPrivate]; ok {
		private, isBool := v.(bool)
		if !isBool {
			return httpError(http.StatusBadRequest, "metadata.private: want true or false")
		}
		m.Metadata = memory.MarkPrivate(m.Metadata, private, memory.ByUser)
	}
	m.Metadata = memory.WithSource(m.Metadata, memory.Source{Via: memory.ViaAdmin, Client: memory.ClientOf(c.Request.UserAgent()), Model: m.Model, RequestID: c.GetHeader("X-Request-Id")})
	out, err := s.Memories.Add(c.Request.Context(), m)
	if err != nil {
		return writeFailed(err)
	}
	c.JSON(http.StatusCreated, memory.JSONOf(out))
	return nil
}

// editMemory serves PATCH /memories/{id}: a new text (embedded again),
// new metadata, or "type":"forgotten" to hide the memory (kept, listed,
// restorable, never injected).
func (s *Server) editMemory(c *gin.Context) error {
	m, err := s.lookup(c)
	if err != nil {
		return err
	}
	var in struct {
		Text     *string        `json:"text"`
		Type     memory.Type    `json:"type"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.NewDecoder(c.Request.Body).Decode(&in); err != nil {
		return httpError(http.StatusBadRequest, "the body is not what PATCH takes: "+jsonProblem(err))
	}
	switch in.Type {
	case "", m.Type:
	case memory.Forgotten:
		m.Hide(time.Now())
	default:
		return httpError(http.StatusBadRequest, fmt.Sprintf("type: a memory's type changes only to forgotten (hide it); POST /memories/%s/restore brings a forgotten one back", m.ID))
	}
	if in.Text != nil {
		if strings.TrimSpace(*in.Text) == "" {
			return httpError(http.StatusBadRequest, "text must not be empty (DELETE forgets a memory)")
		}
		m.Text = strings.TrimSpace(*in.Text)
	}
	if in.Metadata != nil {
		md, err := patchMetadata(m.Metadata, in.Metadata)
		if err != nil {
			return err
		}
		m.Metadata = md
	}
	if m.Type == memory.Profile && in.Text != nil {
		byHand(&m)
	}
	return s.rewrite(c, m, http.StatusOK)
}

// keptByVera are the metadata keys vera writes and a PATCH may not: where
// the memory came from, and what a restore needs.
var keptByVera = []string{memory.MetaSource, "forgotten_from", "forgotten_at", memory.MetaPrivateWhy, memory.MetaSeen}

// patchMetadata merges a PATCH's metadata into md: each key set, a null
// removing it. The keys vera keeps are refused; "private" (true or false)
// marks or unmarks the memory private, by the person's say.
func patchMetadata(md, patch map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(md)+len(patch))
	for k, v := range md {
		out[k] = v
	}
	for k, v := range patch {
		if k == memory.MetaPrivate {
			private, ok := v.(bool)
			if !ok {
				return nil, httpError(http.StatusBadRequest, "metadata.private: want true or false")
			}
			out = memory.MarkPrivate(out, private, memory.ByUser)
			continue
		}
		if slices.Contains(keptByVera, k) {
			return nil, httpError(http.StatusBadRequest, fmt.Sprintf("metadata.%s is vera's record of the memory: a PATCH does not change it", k))
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	if len(out) == 0 {
		out = nil
	}
	return out, nil
}

// byHand marks a profile the user wrote or corrected: it becomes the
// current one (the newest), and the curator keeps it unless the turns it
// reads contradict it.
func byHand(m *memory.Memory) {
	md := make(map[string]any, len(m.Metadata)+1)
	for k, v := range m.Metadata {
		if k != "superseded_by" && k != "superseded_at" {
			md[k] = v
		}
	}
	md[curator.WrittenByUser] = "user"
	m.Metadata, m.Time = md, time.Now().UTC()
}

// rewrite stores a changed memory (embedded again) and takes its old form
// out of the conversations that carry it.
func (s *Server) rewrite(c *gin.Context, m memory.Memory, code int) error {
	out, err := s.Memories.Rewrite(c.Request.Context(), m)
	if err != nil {
		return writeFailed(err)
	}
	ms := []memory.JSON{memory.JSONOf(out)}
	s.withUsage(c.Request.Context(), ms)
	c.JSON(code, ms[0])
	return nil
}

// writeFailed is the answer to a memory that could not be written: a text
// over memory.max_turn_tokens is the request's fault (413, nothing
// stored), anything else the store's.
func writeFailed(err error) error {
	if errors.Is(err, memory.ErrTooLong) {
		return httpError(http.StatusRequestEntityTooLarge, "text: "+err.Error())
	}
	return httpError(http.StatusServiceUnavailable, "writing the store: "+err.Error())
}

// unavailable answers a failure of the memory service (a store, the local
// queue, the usage counts, the history: its message names which) with 503.
func unavailable(err error) error {
	return httpError(http.StatusServiceUnavailable, err.Error())
}

// restoreMemory serves POST /memories/{id}/restore: a forgotten memory
// becomes what it was.
func (s *Server) restoreMemory(c *gin.Context) error {
	m, err := s.lookup(c)
	if err != nil {
		return err
	}
	if !m.Restore() {
		return httpError(http.StatusConflict, fmt.Sprintf("memory %q is not forgotten (its type is %s)", m.ID, m.Type))
	}
	return s.rewrite(c, m, http.StatusOK)
}

// deleteMemory forgets a memory for good: from the store, and from the
// durable queue if its turn still waits there.
func (s *Server) deleteMemory(c *gin.Context) error {
	ctx := c.Request.Context()
	id := c.Param("id")
	if ns := strings.TrimSpace(c.Query("namespace")); ns != "" {
		// Scoped: only a memory of ns (a turn still queued is found
		// nowhere else, and goes too).
		if _, err := s.lookup(c); err != nil && !queued(ctx, s.Memories.Queue, id, ns) {
			return err
		}
	}
	if err := s.Memories.Erase(ctx, id); err != nil {
		return unavailable(err)
	}
	c.Status(http.StatusNoContent)
	return nil
}

// queued reports whether the queue holds turn id of namespace ns.
func queued(ctx context.Context, q memory.Queue, id, ns string) bool {
	if q == nil {
		return false
	}
	pending, err := q.Pending(ctx, 1<<20)
	if err != nil {
		return false
	}
	for _, m := range pending {
		if m.ID == id && m.Namespace == ns {
			return true
		}
	}
	return false
}

// forgetNamespace forgets a whole namespace, its queued turns included
// (DELETE /memories?namespace=NS&confirm=true): EraseNamespace, answered
// with the count alone.
func (s *Server) forgetNamespace(c *gin.Context) error {
	ns := strings.TrimSpace(c.Query("namespace"))
	if ns == "" || c.Query("confirm") != "true" {
		return httpError(http.StatusBadRequest, "forgetting a namespace needs ?namespace=NS&confirm=true")
	}
	r, err := s.Memories.EraseNamespace(c.Request.Context(), ns)
	if err != nil {
		return unavailable(err)
	}
	n := r.Erased["queued"]
	for _, t := range []memory.Type{memory.Raw, memory.Curated, memory.Rule, memory.Profile, memory.Forgotten} {
		n += r.Erased[string(t)]
	}
	c.JSON(http.StatusOK, gin.H{"namespace": ns, "forgotten": n})
	return nil
}

// eraseNamespaceRoute erases everything of one person (DELETE
// /namespaces/{ns}) and answers the receipt.
func (s *Server) eraseNamespaceRoute(c *gin.Context) error {
	ns := strings.TrimSpace(c.Param("ns"))
	if ns == "" {
		return httpError(http.StatusBadRequest, "erasing a namespace needs it named: DELETE /namespaces/NS")
	}
	r, err := s.Memories.EraseNamespace(c.Request.Context(), ns)
	if err != nil {
		return unavailable(err)
	}
	c.JSON(http.StatusOK, r)
	return nil
}

// exportMemories streams every memory (of one namespace, or all) as
// JSONL, page by page: never the whole store in memory.
func (s *Server) exportMemories(c *gin.Context) error {
	ctx := c.Request.Context()
	namespaces := []string{strings.TrimSpace(c.Query("namespace"))}
	if namespaces[0] == "" {
		var err error
		if namespaces, err = s.Memories.Store.Namespaces(ctx); err != nil {
			return httpError(http.StatusServiceUnavailable, "reading the store: "+err.Error())
		}
	}
	c.Header("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(c.Writer)
	for _, ns := range namespaces {
		cursor := ""
		for {
			page, next, err := s.Memories.Store.Scroll(ctx, memory.Filter{Namespace: ns}, cursor, 500)
			if err != nil {
				return httpError(http.StatusServiceUnavailable, "reading the store: "+err.Error())
			}
			for _, m := range page {
				if err := enc.Encode(memory.JSONOf(m)); err != nil {
					return err
				}
			}
			c.Writer.Flush()
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return nil
}

// jsonProblem says what is wrong with a JSON body in the request's own
// terms (a field and what it should be), never in Go's.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return "it is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("field %q: want %s", te.Field, jsonKind(te.Type.Kind()))
	case errors.As(err, &te):
		return "want a JSON object"
	case errors.As(err, new(*time.ParseError)), strings.Contains(err.Error(), "Time"):
		return `field "timestamp": want an RFC 3339 time such as 2026-11-22T10:00:00Z`
	}
	return "not valid JSON"
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a number"
}
