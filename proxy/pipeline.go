package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/proxy/dialect"
)

// maxHold bounds how long the end of an answer waits for its turn to be
// committed: past it the answer ends anyway and health says why.
const maxHold = time.Second

// exposedHeaders lists every X-Vera-* header vera sends, so browser
// clients may read them.
const exposedHeaders = "X-Vera-Context, X-Vera-Memories, X-Vera-Tier, X-Vera-Fallback, X-Vera-Forgot, X-Vera-VRAM"

// maxMemoriesHeader is how many ids X-Vera-Memories lists at most.
const maxMemoriesHeader = 50

// chat is one conversational request on its way through the pipeline:
// decode → route → recall → forward → tee → record.
type chat struct {
	d    dialect.Dialect
	path string // the route, for the cloud's dialects
	body []byte // what is forwarded: the request's bytes, or rewritten with memory
	req  dialect.Request
	ns   string
	off  bool // X-Vera-Memory: off
	// chatID is Open WebUI's chat id (memory.chat_id_header); temporary
	// marks its temporary chats ("local:" ids), which get memory but are
	// never stored, nor are their memory commands run: their user asked
	// for no record.
	chatID    string
	temporary bool
	// injected is the memories the request carries, counted once its
	// answer is complete (Server.Usage).
	injected []string
	// private: the reasons of the private memories injected; its turn
	// is private for them.
	private []string
	// untouched requests carry no conversation vera works on (a load or
	// unload call, a raw prompt, an Open WebUI background task): they
	// are forwarded byte for byte, nothing injected, nothing stored.
	untouched bool
	msgs      []memory.Message // the conversation as memory reads it
	recall    []memory.Message // msgs as recall reads them (RAG: the user's own question)
	user      string           // the user text a stored turn keeps
	// prefill is the start of the answer the request carries as its last
	// message (Open WebUI's "continue", Anthropic's prefill): the stored
	// answer is it plus what comes back.
	prefill string
	// turn is the chat's turn in its conversation; nil for a chat outside
	// any (memory off, generate).
	turn *conversation.Turn
	// forgetting: the chat asked to forget; it is not stored, or what it
	// hid would come straight back.
	forgetting bool
	// commanded is the user text command parsed: one that came from the
	// conversation since is parsed again before the turn is recorded.
	commanded string
	// uncommanded: the user text may not be the user's alone (a RAG
	// template vera could not split with certainty), so no memory command
	// runs on it.
	uncommanded bool
	// owui is Open WebUI's own memory block in the system message; nil
	// when the chat carries none.
	owui *owuiBlock
	// plan is where the chat goes and what goes with it (route).
	plan plan
	// route is the tier decision, for the debug log; nil: not routed.
	route map[string]any
	// unrouted is the body as it came, before a tier model was put in.
	unrouted []byte
}

// serveChat runs a chat through the pipeline's steps, in order.
func (s *Server) serveChat(c *gin.Context, d dialect.Dialect) error {
	ch, err := s.decode(c, d)
	if err != nil {
		return err
	}
	if s.answerLoadLocally(c, ch) {
		return nil
	}
	asked, err := s.routeTier(c.Request.Context(), c.Writer, ch)
	if err != nil {
		return err
	}
	p, err := s.route(c.Request.Context(), ch)
	if err != nil {
		return err
	}
	after, err := s.makeRoom(c, ch, asked, &p)
	if err != nil {
		return err
	}
	defer after()
	var mc *memory.Context
	s.command(c, ch)
	switch {
	case ch.untouched:
	case !p.memory:
		s.follow(ch) // no memory leaves, but the turn is still one of its conversation's
		if err := s.dropOWUI(ch); err != nil {
			return err
		}
	default:
		if mc, err = s.inject(c, ch); err != nil {
			return err
		}
		if mc != nil {
			ch.private = mc.Private
		}
		if mc != nil && mc.Err == nil {
			ch.injected = mc.IDs()
			s.Metrics.keptBack(s.knownModel(p.model), mc.Withheld)
		}
		if p.fb != nil && mc != nil && len(mc.IDs()) > 0 &&
			(p.fallback.policy == memory.None || p.fallback.policy == memory.Shareable && !mc.Shareable) {
			// Built under a policy that sends more than the cloud's: the
			// fallback gets the chat as the client sent it.
			p.fb.memory, p.fallback.memory = false, false
		}
	}
	tee := s.teeFor(c, ch)
	var rename *[2]string
	if asked != "" {
		rename = &[2]string{ch.req.ModelName(), asked}
	}
	if err := s.forward(c, p, ch.d, ch.body, tee, rename); err != nil {
		return err
	}
	s.compact(c, ch)
	if tee != nil && s.Debug != nil {
		answer, ok := tee.Captured()
		s.Debug.Chat(c.GetString(requestIDKey), ch.ns, ch.req.ModelName(), mc, ch.body, len(answer), ok, ch.route)
	}
	return nil
}

// decode reads and parses the request in its dialect, and decides once
// what vera does with it.
func (s *Server) decode(c *gin.Context, d dialect.Dialect) (*chat, error) {
	r := c.Request
	body, err := readChatBody(c.Writer, r)
	if err != nil {
		return nil, err
	}
	req, err := d.Parse(body)
	if err != nil {
		return nil, httpError(http.StatusBadRequest, err.Error(), nil)
	}
	ch := &chat{d: d, path: r.URL.Path, body: body, req: req}
	if ch.ns, err = s.namespace(r); err != nil {
		return nil, err
	}
	if ch.off, err = memoryOff(r); err != nil {
		return nil, err
	}
	ch.chatID = chatIDOf(r, s.ChatIDHeader)
	ch.temporary = strings.HasPrefix(ch.chatID, temporaryChat)
	if !req.Conversation() {
		ch.untouched = true
		return ch, nil
	}
	ch.msgs, ch.user = req.MemoryMessages(), req.LastUser()
	if len(ch.msgs) == 0 && req.PreviousResponseID() == "" {
		ch.untouched = true
		return ch, nil
	}
	if task := s.task(r, ch.msgs, ch.user); task != "" {
		c.Set(taskKey, task)
		ch.untouched = true
		return ch, nil
	}
	if b, rest := findOWUI(ch.msgs); b != nil {
		ch.owui = b
		if s.OpenWebUIMemory == OpenWebUIDrop {
			ch.msgs = rest
		}
	}
	if n := len(ch.msgs); n > 0 && ch.msgs[n-1].Role == "assistant" {
		ch.prefill = ch.msgs[n-1].Content
	}
	ch.recall = ch.msgs
	// A message that holds a closed context but no template vera knows
	// (one an admin rewrote) may open with a document's words.
	ch.uncommanded = strings.Contains(ch.user, contextClose)
	if q, certain, ok := ragUserQuery(ch.user); ok {
		// Open WebUI's RAG template: memory is about the user's own
		// question, never the template or the retrieved documents (which
		// still size the prompt: they are forwarded). Where a document
		// may have posed as the question, no command runs.
		ch.user, ch.uncommanded = q, !certain
		ch.recall = slices.Clone(ch.msgs)
		for i := len(ch.recall) - 1; i >= 0; i-- {
			if ch.recall[i].Role == "user" {
				ch.recall[i].Content = q
				break
			}
		}
	}
	return ch, nil
}

// plan is where a chat goes and what goes with it. The route step decides
// it once; every later step reads it, and the answer's X-Vera-Context
// comes from the plan that answered (the fallback's, when it did).
type plan struct {
	model string // the model that answers, after tier routing
	// cloud: a cloud name, with no Modelfile and the provider's window.
	cloud bool
	up    upstream
	// policy is what the chat is sent of memory (Policies); memory:
	// anything at all.
	policy memory.Policy
	memory bool
	// fallback answers while Ollama cannot be reached (cloud.fallback_model),
	// with its own memory decision; nil: none. fb is its transport.
	fallback *plan
	fb       *fallback
	// window is the context window memory is sized for (the request's
	// num_ctx, else the model's or the provider's, at most what the model
	// was trained for), in the model's tokens; 0: unknown, the builder's
	// default.
	window int
	// scale is how many of the model's tokens one of vera's makes: what
	// was learnt of its answers, else prior.
	scale, prior memory.Scale
	// system is the Modelfile's SYSTEM, which Ollama adds only to a
	// request without a system message: once vera sends one, it carries
	// it. "" for a cloud name.
	system string
}

// route decides the chat's plan: the cloud provider for a cloud name, else
// Ollama, with the fallback model behind it. It runs after tier routing,
// and before recall, so that memory is sized for the model that answers.
func (s *Server) route(ctx context.Context, ch *chat) (plan, error) {
	model := ch.req.ModelName()
	p := plan{model: model, cloud: s.cloudModel(model), up: s.ollama}
	p.policy = s.policyFor(model, p.cloud)
	switch {
	case p.cloud && !cloud.Serves(ch.path):
		return plan{}, httpError(http.StatusBadRequest, fmt.Sprintf("model %q is a cloud model: vera serves it on %s, not on %s", model, cloud.Routes, ch.path), nil)
	case p.cloud:
		p.up = upstream{url: s.Cloud.URL(), transport: s.Cloud, name: "cloud"}
	case s.FallbackModel != "" && !ch.untouched && cloud.Serves(ch.path):
		fp := s.policyFor(s.FallbackModel, true)
		if s.fallbackActive.Load() {
			// Ollama is down: the chat is built for the cloud's policy.
			p.policy = stricter(p.policy, fp)
		}
		p.fallback = &plan{model: s.FallbackModel, cloud: true, policy: fp, memory: fp != memory.None}
		p.fb = &fallback{s: s, d: ch.d, own: ch.body, asked: model, memory: p.fallback.memory}
		p.up = upstream{url: s.ollama.url, transport: p.fb}
	}
	p.memory = p.policy != memory.None
	if p.memory && !ch.untouched && !ch.off && len(ch.msgs) > 0 {
		p.window, p.system = s.sized(ctx, ch, p.cloud)
		p.prior = s.prior(ctx, model, p.cloud)
		p.scale = s.Calibrator.Scale(model, p.prior)
	}
	ch.plan = p
	return p, nil
}

// sized reads the window and the Modelfile SYSTEM of a chat's model, for
// the memory it is sent.
func (s *Server) sized(ctx context.Context, ch *chat, cloud bool) (window int, system string) {
	model := ch.req.ModelName()
	window, _ = ch.req.Options()
	if cloud {
		// No Modelfile; the window is the provider's.
		if window <= 0 {
			window = s.Cloud.Window(ctx, model)
		}
		return window, ""
	}
	if r := ch.msgs[0].Role; r != "system" && r != "developer" {
		// A Responses input opening with a developer message has one.
		system = s.windows.System(ctx, model)
	}
	if window <= 0 {
		window = s.windows.Window(ctx, model)
	}
	if trained := s.windows.Trained(ctx, model); trained > 0 && window > trained {
		// Ollama clamps num_ctx to it: the prompt is cut there.
		window = trained
	}
	return window, system
}

// inject recalls the memory layers and writes them into the request in its
// dialect's shape, reporting what was injected in the response headers.
func (s *Server) inject(c *gin.Context, ch *chat) (*memory.Context, error) {
	if s.Memory == nil {
		return nil, s.dropOWUI(ch)
	}
	mc := s.layers(c, ch)
	if forward := ch.req.WithMemory(mc); forward != nil {
		body, err := dialect.Marshal(forward)
		if err != nil {
			return nil, fmt.Errorf("encoding the chat request: %w", err)
		}
		ch.body = body
	}
	setMemoryHeaders(c.Writer.Header(), mc, ch.owui)
	if s.Calibrator.Untold(ch.plan.model) {
		// An earlier prompt for this model was cut: say so once.
		h := c.Writer.Header()
		h.Set("X-Vera-Context", h.Get("X-Vera-Context")+"; overflow=1")
	}
	return mc, nil
}

// teeFor returns the tee that reads the answer, with the commit of the
// finished turn as its end; nil when nothing needs the answer.
func (s *Server) teeFor(c *gin.Context, ch *chat) *answerTee {
	record := s.Recorder != nil && !ch.off && !ch.untouched && !ch.temporary
	if record && !ch.forgetting && !ch.uncommanded && s.Commands != nil && ch.user != ch.commanded {
		// The user text came from the conversation after command ran (a
		// Responses loop chained by id).
		kind, _ := s.Commands.Parse(ch.user)
		ch.forgetting = kind == memory.Forget
	}
	record = record && !ch.forgetting
	// A request chained by previous_response_id carries only its newest
	// messages: its count says nothing of what vera sent.
	learn := s.Calibrator != nil && !ch.untouched && ch.plan.window > 0 && ch.req.PreviousResponseID() == ""
	use := s.Usage != nil && len(ch.injected) > 0
	if !record && !learn && !use && (s.Debug == nil || ch.untouched) {
		return nil
	}
	tee := &answerTee{d: ch.d}
	if learn {
		p := ch.plan
		tee.onFinal = func(t *answerTee) {
			s.Calibrator.learn(calibration{model: p.model, d: ch.d, body: ch.body, reported: t.PromptTokens, window: p.window, prior: p.prior})
		}
	}
	if ch.turn != nil {
		tee.onStep = func(t *answerTee) { s.convs.Answered(ch.turn, ch.ns, t.Content.String(), t.ResponseID) }
		tee.onKept = func() { s.convs.Keep(ch.turn) }
	}
	if use {
		// Off the chat path: Note adds to a map, flushed in the
		// background.
		keep, ids := tee.onKept, ch.injected
		tee.onKept = func() {
			if keep != nil {
				keep()
			}
			s.Usage.Note(ch.ns, ids, time.Now().UTC())
		}
	}
	if record && strings.TrimSpace(ch.user) != "" {
		tee.onEnd = s.commitTurn(c, ch, memory.Turn{Namespace: ch.ns, Model: ch.req.ModelName(), User: ch.user, Source: sourceOf(c, ch, memory.ViaChat), Private: ch.private})
	}
	return tee
}

// sourceOf is where a memory a chat writes comes from (metadata.source).
func sourceOf(c *gin.Context, ch *chat, via string) memory.Source {
	return memory.Source{Via: via, Dialect: ch.d.String(), ChatID: ch.chatID, Client: memory.ClientOf(c.Request.UserAgent()),
		Model: ch.req.ModelName(), RequestID: c.GetString(requestIDKey)}
}

// readChatBody reads a chat request's body, which vera must have whole to
// work on its messages. A body declared too large is refused before a
// byte of it is read.
func readChatBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxChatBody {
		// Closing is the only way not to read what was announced.
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: %d bytes, the limit is %d", r.ContentLength, maxChatBody), nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChatBody))
	if err == nil {
		return body, nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: the limit is %d bytes", maxChatBody), nil)
	case errors.Is(err, errBodyIdle):
		w.Header().Set("Connection", "close")
		return nil, httpError(http.StatusRequestTimeout, err.Error(), nil)
	case r.Context().Err() != nil:
		return nil, httpError(StatusClientClosed, "client closed request", err)
	}
	return nil, httpError(http.StatusBadRequest, "reading request body", err)
}

// forward sends body to up in place of the request's own, teeing the
// answer through tee when it is set. It returns only once the whole answer
// went out (a broken stream panics with http.ErrAbortHandler inside
// ServeHTTP).
func (s *Server) forward(c *gin.Context, p plan, d dialect.Dialect, body []byte, tee *answerTee, rename *[2]string) error {
	r := c.Request
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Del("Content-Length")
	out.GetBody = nil
	rp := s.newReverseProxy(p.up, d, tee, rename, s.StripThink)
	if h := c.Writer.Header(); h.Get("X-Vera-Context") != "" {
		modify := rp.ModifyResponse
		rp.ModifyResponse = func(res *http.Response) error {
			// Before the answer's headers are copied and sent.
			switch {
			case refused(res.StatusCode):
				dropMemoryHeaders(h)
			case p.fallback != nil && !p.fallback.memory && res.Header.Get("X-Vera-Fallback") != "":
				// The fallback's plan answered, and it was sent no memory.
				dropMemoryHeaders(h)
				h.Set("X-Vera-Context", emptyContext)
			}
			return modify(res)
		}
	}
	rp.ServeHTTP(c.Writer, out)
	return nil
}

// commitTurn returns the tee's onEnd for a chat: it commits the finished
// turn to the durable queue, waiting at most maxHold, so that the client
// has its whole answer only once the turn survives a crash.
func (s *Server) commitTurn(c *gin.Context, ch *chat, t memory.Turn) func(string) {
	ctx := context.WithoutCancel(c.Request.Context())
	// Who the namespace is, noted only with a turn it stores: a request
	// that stores nothing (a load call, memory off) adds no namespace.
	name, email := c.Request.Header.Get("X-OpenWebUI-User-Name"), c.Request.Header.Get("X-OpenWebUI-User-Email")
	if s.Identity.verified() {
		// Open WebUI sends them only inside its token then.
		name, email = s.Identity.labels(c.Request)
	}
	return func(answer string) {
		// Thinking is never stored, also when a model writes it inline.
		t.Assistant, t.Time = dialect.StripThink(ch.prefill+answer), time.Now().UTC()
		if ch.turn != nil {
			// A regenerate or an edit replaces the turn recorded at its
			// place in the conversation.
			t.ID = memory.NewID()
			t.Replaces = s.convs.Record(ch.turn, t.ID, t.Time)
		}
		hctx, cancel := context.WithTimeout(ctx, maxHold)
		defer cancel()
		if err := s.Recorder.Record(hctx, t); err != nil {
			s.log.Debug("answer released before its turn was committed", slog.String("request_id", c.GetString(requestIDKey)), slog.Any("error", err))
			return
		}
		s.Directory.Note(ch.ns, name, email, t.Time)
	}
}

// setMemoryHeaders reports what was injected.
func setMemoryHeaders(h http.Header, mc *memory.Context, owui *owuiBlock) {
	vc := fmt.Sprintf("semantic=%d; recent=%d; rules=%d; tokens=%d", len(mc.Semantic), len(mc.RecentIDs), len(mc.RuleIDs), mc.Tokens())
	switch {
	case errors.Is(mc.Err, memory.ErrLoading):
		// The store is loading its index: the chat went without memory.
		vc = "loading"
	default:
		if mc.Withheld > 0 {
			vc += fmt.Sprintf("; withheld=%d", mc.Withheld)
		}
		if owui != nil {
			vc += fmt.Sprintf("; owui=%d", len(owui.facts))
		}
		if mc.Compacted > 0 {
			vc += fmt.Sprintf("; compacted=%d", mc.Compacted)
		}
	}
	h.Set("X-Vera-Context", vc)
	if ids := mc.IDs(); len(ids) > 0 {
		h.Set("X-Vera-Memories", strings.Join(ids[:min(len(ids), maxMemoriesHeader)], ","))
	}
	h.Set("Access-Control-Expose-Headers", exposedHeaders)
}

// task names the background task a request is (memory.skip_tasks),
// or "" for a conversation.
func (s *Server) task(r *http.Request, msgs []memory.Message, lastUser string) string {
	if s.RecordTasks || len(msgs) == 0 {
		return ""
	}
	for _, h := range []string{"X-OpenWebUI-Task", "X-Vera-Task"} {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			return v
		}
	}
	if task := openWebUITask(lastUser); task != "" {
		return task
	}
	if msgs[0].Role == "system" {
		// Open WebUI's tool-calling task puts its template in the system
		// message; its user message is a bare "Query: ...".
		return openWebUITask(msgs[0].Content)
	}
	return ""
}

// maxNamespace is the longest namespace accepted, in bytes.
const maxNamespace = 256

// namespace scopes a request's memory: the verified identity when
// memory.jwt_secret is set, else the namespace header, else "default". A namespace that is not valid UTF-8 or is too long is
// refused: stores would otherwise change its bytes and merge namespaces.
func (s *Server) namespace(r *http.Request) (string, error) {
	if s.Identity.verified() {
		// The plain header is ignored: anyone could send it.
		ns, err := s.Identity.namespace(r)
		if ns == "" && err == nil {
			ns = memory.DefaultNamespace
		}
		return ns, err
	}
	h := s.NamespaceHeader
	if h == "" {
		h = "X-OpenWebUI-User-Id"
	}
	ns := strings.TrimSpace(r.Header.Get(h))
	switch {
	case ns == "":
		return memory.DefaultNamespace, nil
	case !utf8.ValidString(ns):
		return "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace must be valid UTF-8", h), nil)
	case len(ns) > maxNamespace:
		return "", httpError(http.StatusBadRequest, fmt.Sprintf("header %s: the namespace is %d bytes long; at most %d are allowed", h, len(ns), maxNamespace), nil)
	}
	return ns, nil
}

// memoryOff reads X-Vera-Memory: off, false, 0 or no (any case)
// turn memory off for the request; on, true, 1, yes or no header leave it
// on; anything else is a mistake worth telling.
func memoryOff(r *http.Request) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Vera-Memory"))); v {
	case "off", "false", "0", "no":
		return true, nil
	case "", "on", "true", "1", "yes":
		return false, nil
	default:
		return false, httpError(http.StatusBadRequest, fmt.Sprintf("header X-Vera-Memory: %q is not one of on, off, true, false, 1, 0, yes, no", v), nil)
	}
}

// command carries out a memory command at the start of the user's own
// message: "remember that ..." stores the statement as a curated
// memory now; "forget that ..." hides the memories that hold all its
// content words, names them in X-Vera-Forgot, takes them out of running
// conversations, and keeps the request from being stored. The answer
// comes from the model as usual. A failure is logged: the chat goes on.
func (s *Server) command(c *gin.Context, ch *chat) {
	if s.Commands == nil || ch.untouched || ch.off || ch.temporary {
		return
	}
	kind, statement := s.Commands.Parse(ch.user)
	if ch.uncommanded {
		// Not run, since a document may have written it; but a request
		// that may be the user's to forget is never stored either.
		ch.forgetting = kind == memory.Forget
		return
	}
	ch.commanded = ch.user
	if kind == memory.Forget {
		// Never stored, in any step of its turn (a tool loop's, one
		// continuing a prefill): the fact would come straight back.
		ch.forgetting = true
	}
	if n := len(ch.msgs); n == 0 || ch.msgs[n-1].Role != "user" || ch.req.ToolLoop() {
		return // the command ran at its turn's first step
	}
	ctx, id := c.Request.Context(), slog.String("request_id", c.GetString(requestIDKey))
	switch kind {
	case memory.Remember:
		mid, err := s.Commands.Remember(ctx, ch.ns, statement, sourceOf(c, ch, memory.ViaCommand))
		if err != nil {
			s.log.Warn("remembering at the user's request", slog.Any("error", err), id)
			return
		}
		s.log.Debug("remembered at the user's request", slog.String("memory", mid), id)
	case memory.Forget:
		ch.forgetting = true
		ids, err := s.Commands.Forget(ctx, ch.ns, statement)
		if errors.Is(err, memory.ErrTooBroad) {
			s.log.Info("a request to forget named no single fact", slog.Any("error", err), id)
			return
		}
		if err != nil {
			s.log.Warn("forgetting at the user's request", slog.Any("error", err), id)
		}
		if len(ids) > 0 {
			s.withdraw("", ids...)
			c.Writer.Header().Set("X-Vera-Forgot", strings.Join(ids, ","))
		}
		s.log.Debug("forgot at the user's request", slog.Int("memories", len(ids)), id)
	}
}
