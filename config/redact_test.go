package config

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:11435", "http://127.0.0.1:11435"},
		{"http://user:s3cret@127.0.0.1:11435", "http://user:xxxxx@127.0.0.1:11435"},
		{"https://user@ollama.example.com", "https://user@ollama.example.com"},
		{"http://u:p%40ss@h:1/base", "http://u:xxxxx@h:1/base"},
		{"http://h:1?api_key=s3cret&model=x", "http://h:1?api_key=xxxxx&model=x"},
		{"http://h:1?Token=a&KEY=b&apikey=c&access_token=d&password=e&secret=f&keep=g",
			"http://h:1?Token=xxxxx&KEY=xxxxx&apikey=xxxxx&access_token=xxxxx&password=xxxxx&secret=xxxxx&keep=g"},
		{"http://h:1?monkey=banana&tokens=5", "http://h:1?monkey=banana&tokens=5"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			u, err := url.Parse(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, Redact(u))
			assert.Equal(t, tt.want, RedactURL(tt.in))
		})
	}
	assert.Equal(t, "", Redact(nil))
}

func TestRedactURLWithoutScheme(t *testing.T) {
	assert.Equal(t, "user:xxxxx@qdrant:6334", RedactURL("user:s3cret@qdrant:6334"))
	assert.Equal(t, "qdrant:6334", RedactURL("qdrant:6334"))
	assert.NotContains(t, RedactURL("ftp://u:s3cret@h:bad port"), "s3cret")
}

func TestRedactText(t *testing.T) {
	tests := []struct{ in, want string }{
		{`Get "http://user:s3cret@127.0.0.1:1/api/version": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Get "http://user:xxxxx@127.0.0.1:1/api/version": dial tcp 127.0.0.1:1: connect: connection refused`},
		{`parse "http://u:p@ss@h:x": invalid port`, `parse "http://u:xxxxx@h:x": invalid port`},
		{`Post "https://h/api/embed?token=s3cret": EOF`, `Post "https://h/api/embed?token=xxxxx": EOF`},
		{"no url here: a=b", "no url here: a=b"},
		{"ok: http://h:1?key=s3cret, version 2.", "ok: http://h:1?key=xxxxx, version 2."},
		{"(see http://h:1?key=s3cret).", "(see http://h:1?key=xxxxx)."},
		{"mail me at a@b, see http://h:1/x", "mail me at a@b, see http://h:1/x"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, RedactText(tt.in))
		assert.Equal(t, tt.want, RedactText(tt.want), "redacting twice changes nothing")
	}
}

func TestRedactIn(t *testing.T) {
	u, err := url.Parse("http://user:s3cret@127.0.0.1:1?api_key=k3y-value")
	require.NoError(t, err)
	// What net/http's client reports: the password replaced by ***, the
	// query as it was.
	_, err = (&http.Client{}).Get(u.JoinPath("/api/version").String())
	require.Error(t, err)
	got := RedactIn(err.Error(), u)
	assert.NotContains(t, got, "s3cret")
	assert.NotContains(t, got, "k3y-value")
	assert.Contains(t, got, "127.0.0.1:1")

	// A secret quoted on its own, apart from the URL.
	got = RedactIn(errors.New(`bad credentials "s3cret" for k3y-value`).Error(), u)
	assert.Equal(t, `bad credentials "xxxxx" for xxxxx`, got)
	assert.Equal(t, "up at "+Redact(u), RedactIn("up at "+u.String(), u))
}
