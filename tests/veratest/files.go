package veratest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory/embedded"
)

// OpenStore opens the embedded store in dir, closed by the cleanup.
func OpenStore(t *testing.T, dir string) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(context.Background(), dir)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// WriteConfig writes config.toml in a new directory and returns it.
func WriteConfig(t *testing.T, toml string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(toml), 0o600))
	return dir
}

// ConfigDir returns a VERA_CONFIG_DIR setting whose config.toml holds toml.
func ConfigDir(t *testing.T, toml string) string {
	t.Helper()
	return "VERA_CONFIG_DIR=" + WriteConfig(t, toml)
}

// eachFile calls fn with every file under dir: its path from dir and
// its bytes.
func eachFile(t *testing.T, dir string, fn func(rel string, b []byte)) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // renamed meanwhile (a snapshot's temporary file)
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fn(rel, b)
		return nil
	}))
}

// Holding lists the files under dir that hold secret, in any case (the
// index keeps words lowercased), read as raw bytes as grep -a reads them,
// with the offsets of the first hits.
func Holding(t *testing.T, dir, secret string) []string {
	t.Helper()
	want := asciiLower([]byte(secret))
	var out []string
	eachFile(t, dir, func(rel string, b []byte) {
		low := asciiLower(b)
		var at []int
		for off := 0; len(at) < 5; {
			i := bytes.Index(low[off:], want)
			if i < 0 {
				break
			}
			at = append(at, off+i)
			off += i + len(want)
		}
		if len(at) > 0 {
			out = append(out, fmt.Sprintf("%s (%d times, at %v)", rel, bytes.Count(low, want), at))
		}
	})
	return out
}

// LogLeaks logs, for each place a file under dir holds secret, the bytes
// before it: which record kept it.
func LogLeaks(t *testing.T, dir, secret string) {
	t.Helper()
	want := asciiLower([]byte(secret))
	eachFile(t, dir, func(rel string, b []byte) {
		low := asciiLower(b)
		for off := 0; ; {
			i := bytes.Index(low[off:], want)
			if i < 0 {
				return
			}
			at := off + i
			t.Logf("%s at %d: %q", rel, at, b[max(0, at-240):min(len(b), at+len(want)+40)])
			off = at + len(want)
		}
	})
}

// CopyDir copies dir's files as they are on disk now: what a kill -9 at
// this moment would leave.
func CopyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	eachFile(t, dir, func(rel string, b []byte) {
		require.NoError(t, os.MkdirAll(filepath.Join(to, filepath.Dir(rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(to, rel), b, 0o600))
	})
	return to
}

// asciiLower lowercases b's ASCII letters and keeps every other byte as
// it is (bytes.ToLower rewrites invalid UTF-8, moving the offsets).
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}
