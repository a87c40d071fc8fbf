package proxy

import "github.com/vera-proxy/vera/proxy/dialect"

// The dialects by the short names the tests use.
var (
	ollamaChat        dialect.Dialect = dialect.OllamaChat{}
	ollamaGenerate    dialect.Dialect = dialect.OllamaGenerate{}
	openAIChat        dialect.Dialect = dialect.OpenAIChat{}
	openAIResponses   dialect.Dialect = dialect.OpenAIResponses{}
	anthropicMessages dialect.Dialect = dialect.AnthropicMessages{}
)

// retarget is the dialect's Retarget, with the dialect last.
func retarget(body []byte, model string, strip, think bool, d dialect.Dialect) ([]byte, error) {
	return d.Retarget(body, model, strip, think)
}

// recentIntro heads the recent turns written as text (generate, Responses).
const recentIntro = "The latest exchanges with this user, oldest first:"
