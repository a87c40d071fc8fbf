package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory"
)

// maxChatBody bounds an /api/chat request body, which vera must read whole
// to work on its messages. Images travel inside it as base64.
const maxChatBody = 256 << 20

// decode reads and parses the request in its dialect, and decides once
// what vera does with it.
func (pl *pipeline) decode(w http.ResponseWriter, r *http.Request, d dialect.Dialect, id string) (*chat, error) {
	body, err := readChatBody(w, r)
	if err != nil {
		return nil, err
	}
	req, err := d.Parse(body)
	if err != nil {
		return nil, httpError(http.StatusBadRequest, err.Error(), nil)
	}
	ch := &chat{d: d, path: r.URL.Path, body: body, req: req, requestID: id, userAgent: r.UserAgent()}
	if ch.ns, ch.name, ch.email, err = pl.naming.person(r); err != nil {
		return nil, err
	}
	if ch.off, err = memoryOff(r); err != nil {
		return nil, err
	}
	ch.chatID = chatIDOf(r, pl.chatIDHeader)
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
	if pl.task(r, ch.msgs, ch.user) != "" {
		ch.untouched = true // an Open WebUI background task
		return ch, nil
	}
	if err := pl.readMessages(ch); err != nil {
		return nil, err
	}
	return ch, nil
}

// readMessages reads what memory needs of a conversation's messages: Open
// WebUI's own memory block, the start of an answer to continue, and the
// user's own question inside Open WebUI's RAG template.
func (pl *pipeline) readMessages(ch *chat) error {
	if b, rest := findOWUI(ch.msgs); b != nil {
		// The conversation is the same whatever facts Open WebUI found
		// for each of its questions.
		ch.owui, ch.own = b, rest
		if pl.owuiMemory == OpenWebUIDrop {
			ch.msgs = rest
			if err := pl.dropOWUI(ch); err != nil {
				return err
			}
			ch.own = ch.msgs
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
	return nil
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

// task names the background task a request is (memory.skip_tasks),
// or "" for a conversation.
func (pl *pipeline) task(r *http.Request, msgs []memory.Message, lastUser string) string {
	if pl.recordTasks || len(msgs) == 0 {
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
