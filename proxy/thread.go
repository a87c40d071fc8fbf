package proxy

import (
	"net/http"
	"strings"

	"github.com/vera-proxy/vera/dialect"
	"github.com/vera-proxy/vera/memory/conversation"
)

// temporaryChat opens the chat id of every temporary chat of Open WebUI.
const temporaryChat = "local:"

// chatIDOf reads the chat id a request carries in header.
func chatIDOf(r *http.Request, header string) string {
	return strings.TrimSpace(r.Header.Get(header))
}

// threadOf reads a request's thread, given its chat id.
func threadOf(chatID string, req dialect.Request) conversation.Thread {
	if strings.HasPrefix(chatID, temporaryChat) {
		// Open WebUI's temporary chats are all "local:" + the browser
		// tab's socket id: it names a tab, not a conversation.
		chatID = ""
	}
	return conversation.Thread{
		ChatID:             chatID,
		PreviousResponseID: req.PreviousResponseID(),
		FirstUser:          req.FirstUser(),
		ToolLoop:           req.ToolLoop(),
	}
}
