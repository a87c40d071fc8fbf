package proxy

import "strings"

// Open WebUI sends its background tasks (a chat's title, its tags, follow-up
// suggestions, search queries...) to the model as ordinary chats whose one
// user message is a filled-in prompt template. vera must neither inject
// memory into them nor store them. Many of those templates start with
// "### Task:", but so does Open WebUI's RAG template, which it puts in front
// of the user's own message in every chat that uses a file, a knowledge base
// or a web search: that one is a conversation. So each task is recognised by
// its template's own opening line, and the RAG template is unwrapped to the
// user's text.
//
// The openings below are those of Open WebUI's default templates, past and
// present (backend/open_webui/config.py and the files it grew into; see
// testdata/tasks/SOURCES.md). A template an admin rewrote is not recognised.

// The names are Open WebUI's own (TASKS in backend/open_webui/constants.py,
// sent as the request's metadata "task").
const (
	taskTitle               = "title_generation"
	taskTags                = "tags_generation"
	taskFollowUp            = "follow_up_generation"
	taskQuery               = "query_generation"
	taskImagePrompt         = "image_prompt_generation"
	taskAutocomplete        = "autocomplete_generation"
	taskEmoji               = "emoji_generation"
	taskMoA                 = "moa_response_generation"
	taskFunctionCalling     = "function_calling"
	taskDocumentSuggestions = "document_suggestions_generation"
	taskContextCompaction   = "context_compaction"
)

// taskHeadLen bounds what is read of a message to recognise a template: all
// the openings fit well within it, whatever the message's length.
const taskHeadLen = 1024

const taskHeading = "### Task:"

type taskOpening struct{ prefix, task string }

// taskInstructions are the instruction lines that follow "### Task:" (on
// the next line, or on the same one).
var taskInstructions = []taskOpening{
	{"Generate a concise title summarizing the chat history.", taskTitle},
	{"Generate a concise, 3-5 word title with an emoji summarizing the chat history.", taskTitle},
	{"Generate 1-3 broad tags categorizing the main themes of the chat history", taskTags},
	{"Suggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in this conversation", taskFollowUp},
	{"Analyze the chat history to determine the necessity of generating search queries", taskQuery},
	{"Based on the chat history, determine whether a search is necessary", taskQuery},
	{"Generate a detailed prompt for am image generation task based on the given language and context.", taskImagePrompt},
	{"Generate a detailed prompt for an image generation task based on the given language and context.", taskImagePrompt},
	{"You are an autocompletion system. Continue the text in `<text>`", taskAutocomplete},
	{"Generate 3-5 insightful questions a user would naturally want to ask about the provided document content", taskDocumentSuggestions},
	{"Summarize the conversation history that will be compacted out of the active chat context.", taskContextCompaction},
}

// taskStarts are the openings of the templates without a "### Task:"
// heading, which older versions used for titles and search queries.
var taskStarts = []taskOpening{
	{"Create a concise, 3-5 word phrase as a header for the following query, strictly adhering to the 3-5 word limit and avoiding the use of the word 'title':", taskTitle},
	{"Create a concise, 3-5 word title with an emoji as a title for the prompt in the given language.", taskTitle},
	{"Create a concise, 3-5 word title with an emoji as a title for the chat history, in the given language.", taskTitle},
	{"You are tasked with generating web search queries. Give me an appropriate query to answer my question for google search.", taskQuery},
	{"Assess the need for a web search based on the current question and prior interactions, but lean towards suggesting a Google search query if uncertain.", taskQuery},
	{"Your task is to reflect the speaker's likely facial expression through a fitting emoji.", taskEmoji},
	{"You have been provided with a set of responses from various models to the latest user query:", taskMoA},
	// The tool-calling template is the system message of its request (the
	// user message is "Query: ..." or "History: ... Query: ..."); it is
	// recognised here for a caller that also looks at the system prompt.
	// "{{TOOLS}}" is the tools' specs as a JSON array.
	{"Available Tools: [", taskFunctionCalling},
}

// The openings of the RAG template's versions.
const (
	// Up to 0.2: the template replaced the user's message, the query in
	// its last line, "Query: [query]".
	ragOpeningLearned = "Use the following context as your learned knowledge, inside <context></context> XML tags."
	// 0.3 and 0.4: the query in a <user_query> block.
	ragOpeningRules = "You are given a user query, some textual context and rules, all inside xml tags."
	// 0.5 on, after "### Task:": with a <user_query> block until the
	// latest versions, which dropped it.
	ragInstruction = "Respond to the user query using the provided context"
)

// openWebUITask reports the name of the Open WebUI background task whose
// prompt text is (the last user message of a request), or "" when it is
// none (a conversation, including one wrapped in the RAG template).
func openWebUITask(text string) string {
	head := messageHead(text)
	if rest, ok := strings.CutPrefix(head, taskHeading); ok {
		line := firstLine(rest)
		for _, o := range taskInstructions {
			if strings.HasPrefix(line, o.prefix) {
				return o.task
			}
		}
		return ""
	}
	for _, o := range taskStarts {
		if strings.HasPrefix(head, o.prefix) {
			return o.task
		}
	}
	return ""
}

// ragUserQuery returns the user's own text when text is Open WebUI's RAG
// template wrapped around a question, and ok=false otherwise. The query is
// trimmed of surrounding white space and may be empty (a message of images
// alone); it is always a substring of text.
//
// Open WebUI has placed the filled-in template three ways: as the whole
// message (up to 0.2), in front of the first user message of a chat sent to
// an Ollama model (0.3 to 0.6; the system message for other models), and
// in front of the last one (later versions, unless RAG_SYSTEM_CONTEXT puts
// it in the system message). In front means template + "\n" + the message,
// so a template that holds the query is followed by a second copy of it.
//
// Retrieved documents are written between <context> and </context>, and
// are anyone's: a web page or an uploaded file can hold "</context>", a
// <user_query> block or a "Query:" line of its own, to pass its words off
// as the user's (and so plant or hide memories with a command). So the
// query is taken only from the text after the last "</context>", which
// only the template's tail and the user's own message can hold. certain
// is false when that text is not the tail of a template vera knows and
// the message holds more than one "</context>": what vera keeps is then
// still the user's, but maybe only the end of it, and no memory command
// may run on it.
func ragUserQuery(text string) (query string, certain, ok bool) {
	head := messageHead(text)
	tail := queryBlockIn
	switch {
	case strings.HasPrefix(head, ragOpeningLearned):
		// Its opening names the tags: the documents start after it.
		tail = queryLineIn
		text = text[strings.Index(text, ragOpeningLearned)+len(ragOpeningLearned):]
	case strings.HasPrefix(head, ragOpeningRules):
	default:
		rest, found := strings.CutPrefix(head, taskHeading)
		if !found || !strings.HasPrefix(firstLine(rest), ragInstruction) {
			return "", false, false
		}
	}
	i := strings.LastIndex(text, contextClose)
	if i < 0 {
		return "", false, false
	}
	after := text[i+len(contextClose):]
	if q, ok := tail(after); ok {
		return q, true, true
	}
	// The latest template ends with the context: the user's message
	// follows it. A question holding "</context>" loses its head rather
	// than the reply getting documents.
	return strings.TrimSpace(after), strings.Count(text, contextClose) == 1, true
}

// userText is a user message's own words: the question when it is wrapped
// in Open WebUI's RAG template, else the message.
func userText(text string) string {
	if q, _, ok := ragUserQuery(text); ok {
		return q
	}
	return text
}

const (
	contextClose   = "</context>"
	userQueryOpen  = "<user_query>"
	userQueryClose = "</user_query>"
)

// queryBlockIn returns what the template's <user_query> block holds, when
// tail (what follows the context) is the template's tail: the block alone,
// or the block and a copy of its text (the template in front of the
// message it quotes). The copy is looked for first, since the question
// itself may hold the tags.
func queryBlockIn(tail string) (string, bool) {
	i := strings.Index(tail, userQueryOpen)
	if i < 0 || !templateOnly(tail[:i]) {
		// The block must open the tail: one later on is in the user's
		// message (a paste), not the template's.
		return "", false
	}
	if p := strings.LastIndex(tail, userQueryClose); p > i {
		if q, ok := repeatedQuery(tail, p); ok {
			return q, true
		}
	}
	// Else the block ends the tail: the template without a copy.
	body := tail[i+len(userQueryOpen):]
	j := strings.LastIndex(body, userQueryClose)
	if j < 0 || strings.TrimSpace(body[j+len(userQueryClose):]) != "" {
		return "", false
	}
	return strings.TrimSpace(body[:j]), true
}

// templateOnly reports whether what stands between the context and the
// <user_query> block is the template's own: nothing, or the rules of the
// 0.3-0.4 template.
func templateOnly(s string) bool {
	s = strings.TrimSpace(s)
	return s == "" || strings.HasPrefix(s, "<rules>") && strings.HasSuffix(s, "</rules>") && strings.Count(s, "<rules>") == 1
}

// repeatedQuery reports whether the "</user_query>" at p closes a block
// whose text is also all that follows it, as when the template is put in
// front of the message that it quotes. A question holding the tags is
// tried at its own "</user_query>" too: the template's is found when the
// copy after it matches.
func repeatedQuery(tail string, p int) (string, bool) {
	for range 4 { // a few of the question's own tags, not one try per tag
		after := strings.TrimSpace(tail[p+len(userQueryClose):])
		before := strings.TrimRight(tail[:p], spaces)
		if strings.HasSuffix(before, after) {
			q := before[len(before)-len(after):]
			if strings.HasSuffix(strings.TrimRight(before[:len(before)-len(after)], spaces), userQueryOpen) {
				return q, true
			}
		}
		if p = strings.LastIndex(tail[:p], userQueryClose); p < 0 {
			break
		}
	}
	return "", false
}

// queryLineIn returns the query of the first template, whose tail ends
// with "Query: [query]" after a fixed sentence.
func queryLineIn(tail string) (string, bool) {
	const marker = "Given the context information, answer the query."
	i := strings.Index(tail, marker)
	if i < 0 {
		return "", false
	}
	rest := strings.TrimLeft(tail[i+len(marker):], spaces)
	q, ok := strings.CutPrefix(rest, "Query:")
	if !ok {
		return "", false
	}
	q = strings.TrimPrefix(q, " ")
	return strings.TrimSpace(undoubled(q)), true
}

// undoubled returns q's first half when q is a text, a newline and the
// same text again: the template put in front of the message it quotes.
func undoubled(q string) string {
	for _, nl := range []string{"\n", "\r\n"} {
		n := len(q) - len(nl)
		if n < 0 || n%2 != 0 {
			continue
		}
		k := n / 2
		if q[k:k+len(nl)] == nl && q[:k] == q[k+len(nl):] {
			return q[:k]
		}
	}
	return q
}

const spaces = " \t\r\n"

// messageHead returns the start of text, past leading white space (and a
// byte order mark), at most taskHeadLen bytes of it.
func messageHead(text string) string {
	i := 0
	for i < len(text) && i < taskHeadLen {
		if strings.IndexByte(spaces, text[i]) >= 0 {
			i++
		} else if strings.HasPrefix(text[i:], "\ufeff") {
			i += len("\ufeff")
		} else {
			break
		}
	}
	text = text[i:]
	if len(text) > taskHeadLen {
		text = text[:taskHeadLen]
	}
	return text
}

// firstLine returns the first line of s that is not blank, without its
// leading and trailing white space.
func firstLine(s string) string {
	s = strings.TrimLeft(s, spaces)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimRight(s, spaces)
}
