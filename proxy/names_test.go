package proxy

import "github.com/vera-proxy/vera/dialect"

// The dialects by the short names the tests use.
var (
	ollamaChat        dialect.Dialect = dialect.OllamaChat{}
	ollamaGenerate    dialect.Dialect = dialect.OllamaGenerate{}
	openAIChat        dialect.Dialect = dialect.OpenAIChat{}
	openAIResponses   dialect.Dialect = dialect.OpenAIResponses{}
	anthropicMessages dialect.Dialect = dialect.AnthropicMessages{}
)

// recentIntro heads the recent turns written as text (generate, Responses).
const recentIntro = "The latest exchanges with this user, oldest first:"
