package proxy

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The answer of a routed chat names the virtual model, however its bytes
// come split.
func TestRenamerAcrossChunks(t *testing.T) {
	body := `{"model":"qwen3:8b","message":{"content":"the model \"qwen3:8b\" said"}}` + "\n" + `{"model":"qwen3:8b","done":true}` + "\n"
	want := strings.ReplaceAll(body, `"model":"qwen3:8b"`, `"model":"vera"`)
	for size := 1; size <= len(body); size++ {
		r := newRenamer(io.NopCloser(&chunked{s: body, n: size}), "qwen3:8b", "vera")
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "reads of %d bytes", size)
	}
}

// FuzzRenamer: any body, any split: the same as replacing in one piece.
func FuzzRenamer(f *testing.F) {
	f.Add(`{"model":"m","x":1}`+"\n", 3)
	f.Add(`"model":"m""model":"m"`, 1)
	f.Add(`"model":"mm"`, 5)
	f.Fuzz(func(t *testing.T, body string, size int) {
		if size <= 0 {
			size = 1
		}
		got, err := io.ReadAll(newRenamer(io.NopCloser(&chunked{s: body, n: size}), "m", "vera"))
		require.NoError(t, err)
		assert.Equal(t, strings.ReplaceAll(body, `"model":"m"`, `"model":"vera"`), string(got))
	})
}

// chunked gives s n bytes at a time.
type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := copy(p, c.s[:min(c.n, len(c.s))])
	c.s = c.s[k:]
	return k, nil
}
