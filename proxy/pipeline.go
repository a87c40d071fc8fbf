package proxy

import (
	"log/slog"
	"net/http"

	"github.com/vera-proxy/vera/cloud"
	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/conversation"
	"github.com/vera-proxy/vera/ollama"
	"github.com/vera-proxy/vera/proxy/vram"
)

// pipeline is the chat routes' work, in steps: decode → route → recall →
// forward → tee → record. Server builds it once, from its settings; it
// holds only what the steps use. Each step takes the request's context
// and a logger that carries its id.
type pipeline struct {
	log     *slog.Logger
	metrics *Metrics
	debug   *DebugLog

	// decode: whose the chat is, and what vera does with it.
	naming       naming
	chatIDHeader string
	recordTasks  bool
	owuiMemory   string

	// route: where it goes, and the window its memory is sized for.
	ollama     upstream
	cloud      *cloud.Provider
	catalog    *catalog
	routing    *Routing
	policies   Policies
	fallback   *fallbacks // nil: no fallback model
	vram       *vram.Manager
	models     *ollama.ModelInfo
	calibrator *Calibrator

	// recall: the memory it gets, as a turn of its conversation, and the
	// memory commands it carries.
	memory   *recaller // nil: chats go as they are
	convs    *conversation.Set
	commands *memory.Commands

	// forward, tee and record.
	fw         *forwarder
	stripThink bool
	recorder   Recorder
	directory  *memory.Directory
	usage      *memory.Usage
}

// newPipeline builds the chat pipeline from s's settings, forwarding
// through fw, and wires the conversations to its recall.
func (s *Server) newPipeline(fw *forwarder, client *ollama.Client) *pipeline {
	convs := s.Conversations
	if convs == nil {
		convs = conversation.New(0)
	}
	if convs.UserText == nil {
		convs.UserText = userText
	}
	convs.EveryTurn = convs.EveryTurn || s.RecallEveryTurn
	pl := &pipeline{
		log: s.log, metrics: s.Metrics, debug: s.Debug,
		naming: s.naming(), chatIDHeader: s.ChatIDHeader, recordTasks: s.RecordTasks, owuiMemory: s.OpenWebUIMemory,
		ollama: s.ollama, cloud: s.Cloud, catalog: s.catalog, routing: s.Routing, policies: s.Policies,
		vram: s.VRAM, models: ollama.NewModelInfo(client), calibrator: s.Calibrator,
		convs: convs, commands: s.Commands,
		fw: fw, stripThink: s.StripThink, recorder: s.Recorder, directory: s.Directory, usage: s.Usage,
	}
	if s.Memory != nil {
		pl.memory = &recaller{memory: s.Memory, metrics: s.Metrics}
		if convs.Recaller == nil {
			convs.Recaller = pl.memory
		}
	}
	if s.FallbackModel != "" {
		pl.fallback = &fallbacks{model: s.FallbackModel, ollama: s.ollama.transport, cloud: s.Cloud, metrics: s.Metrics, log: s.log}
	}
	return pl
}

// chat is one conversational request on its way through the pipeline.
type chat struct {
	d    dialect.Dialect
	path string // the route, for the cloud's dialects
	body []byte // what is forwarded: the request's bytes, or rewritten with memory
	req  dialect.Request
	// requestID names the request in log lines and in the memories it
	// writes; userAgent tells its client.
	requestID, userAgent string
	ns                   string
	// name and email are who the namespace is (Open WebUI's user
	// headers, or its verified token), noted with a turn stored.
	name, email string
	off         bool // X-Vera-Memory: off
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
	// own is msgs without that block, as the conversation reads them;
	// nil when there is none.
	own []memory.Message
	// plan is where the chat goes and what goes with it (route).
	plan plan
	// route is the tier decision, for the debug log; nil: not routed.
	route map[string]any
	// unrouted is the body as it came, before a tier model was put in.
	unrouted []byte
}

// source is where a memory the chat writes comes from (metadata.source).
func (ch *chat) source(via string) memory.Source {
	return memory.Source{Via: via, Dialect: ch.d.String(), ChatID: ch.chatID, Client: memory.ClientOf(ch.userAgent),
		Model: ch.req.ModelName(), RequestID: ch.requestID}
}

// serve runs a chat through the pipeline's steps, in order; id is the
// request's.
func (pl *pipeline) serve(w http.ResponseWriter, r *http.Request, d dialect.Dialect, id string) error {
	ctx, log, h := r.Context(), pl.log.With(slog.String("request_id", id)), w.Header()
	ch, err := pl.decode(w, r, d, id)
	if err != nil {
		return err
	}
	if pl.answerLoadLocally(w, ch) {
		return nil
	}
	asked, err := pl.routeTier(ctx, log, h, ch)
	if err != nil {
		return err
	}
	if err := pl.route(ctx, ch); err != nil {
		return err
	}
	after, err := pl.makeRoom(ctx, log, h, ch, asked)
	if err != nil {
		return err
	}
	defer after()
	pl.command(ctx, log, h, ch)
	mc, err := pl.remember(ctx, log, h, ch)
	if err != nil {
		return err
	}
	tee := pl.teeFor(ctx, log, ch)
	pl.forward(w, r, ch, tee, asked)
	pl.compact(log, ch)
	pl.debugChat(ch, mc, tee)
	return nil
}

// debugChat writes the chat's line of the debug log (general.debug).
func (pl *pipeline) debugChat(ch *chat, mc *memory.Context, tee *answerTee) {
	if tee == nil || pl.debug == nil {
		return
	}
	answer, ok := tee.Captured()
	pl.debug.Chat(ch.requestID, ch.ns, ch.req.ModelName(), mc, ch.body, len(answer), ok, ch.route)
}
