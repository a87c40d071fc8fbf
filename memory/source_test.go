package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vera-proxy/vera/memory"
)

func TestClientOf(t *testing.T) {
	for ua, want := range map[string]string{
		"ollama/0.24.0 (amd64 linux) Go/go1.26": "ollama/0.24.0",
		"OpenAI/Go 3.96.0":                      "OpenAI/Go 3.96.0",
		"Anthropic/Go 1.19.0":                   "Anthropic/Go 1.19.0",
		"curl/8.5.0":                            "curl/8.5.0",
		"Mozilla/5.0 (X11; Linux x86_64)":       "Mozilla/5.0",
		"vera-test tool":                        "vera-test",
		"":                                      "",
		"bad\x01name/1":                         "bad",
	} {
		assert.Equal(t, want, memory.ClientOf(ua), ua)
	}
}
