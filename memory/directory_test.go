package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/memory/embedded"
)

// The directory notes who each namespace is, keeps a name or an email
// its client did not send this time, refuses header values it could not
// show, and survives a restart once flushed.
func TestDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := embedded.Open(ctx, dir)
	require.NoError(t, err)
	d := memory.NewDirectory(db)
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	d.Note("u-1", "Alice Martin", "alice@example.com", t0)
	d.Note("u-1", "", "", t0.Add(time.Hour)) // a chat without the headers
	d.Note("u-2", "Bob\r\nX-Evil: 1", "bob@example.com", t0)
	d.Note("u-3", "Jos%C3%A9 Mart%C3%ADn", "", t0)     // Open WebUI percent-encodes names
	d.Note("u-4", "Eve\u202eredrow", "\x1b[2Jeve", t0) // bidi override, terminal escape
	d.Note("", "Nobody", "", t0)
	require.NoError(t, d.Flush(ctx))

	all, err := d.All(ctx)
	require.NoError(t, err)
	assert.Equal(t, memory.Seen{Namespace: "u-1", Name: "Alice Martin", Email: "alice@example.com", LastSeen: t0.Add(time.Hour)}, all["u-1"])
	assert.Equal(t, "", all["u-2"].Name, "a value that is not one clean line is not kept")
	assert.Equal(t, "José Martín", all["u-3"].Name)
	assert.Equal(t, memory.Seen{Namespace: "u-4", LastSeen: t0}, all["u-4"], "no control or bidi-override character is kept")
	require.NoError(t, d.Forget(ctx, "u-4"))
	all, err = d.All(ctx)
	require.NoError(t, err)
	assert.Len(t, all, 3)
	require.NoError(t, db.Close())

	db, err = embedded.Open(ctx, dir)
	require.NoError(t, err)
	defer db.Close()
	d = memory.NewDirectory(db)
	d.Note("u-2", "Bob", "", t0.Add(2*time.Hour))
	all, err = d.All(ctx)
	require.NoError(t, err)
	assert.Equal(t, "Alice Martin", all["u-1"].Name, "kept across a restart")
	assert.Equal(t, memory.Seen{Namespace: "u-2", Name: "Bob", Email: "bob@example.com", LastSeen: t0.Add(2 * time.Hour)}, all["u-2"], "noted since, merged with what was kept")
}

// seenStore keeps a directory's rows in memory.
type seenStore struct{ rows []memory.Seen }

func (s *seenStore) SaveSeen(_ context.Context, seen ...memory.Seen) error {
	s.rows = append(s.rows, seen...)
	return nil
}
func (s *seenStore) LoadSeen(context.Context) ([]memory.Seen, error) { return s.rows, nil }
func (s *seenStore) DeleteSeen(context.Context, string) error        { return nil }

// However many namespaces are noted, or were kept by an earlier run, the
// directory holds at most Max of them: the most recently seen.
func TestDirectoryStaysBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		stored int // rows an earlier run kept
		noted  int // namespaces noted now
	}{
		{"noted", 0, 1000},
		{"kept by an earlier run", 1000, 0},
		{"both", 600, 600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := &seenStore{}
			for i := range tc.stored {
				store.rows = append(store.rows, memory.Seen{Namespace: fmt.Sprint("old-", i), LastSeen: t0.Add(time.Duration(i) * time.Second)})
			}
			d := memory.NewDirectory(store)
			d.Max = 64
			for i := range tc.noted {
				d.Note(fmt.Sprint("new-", i), "", "", t0.Add(time.Hour+time.Duration(i)*time.Second))
			}
			all, err := d.All(context.Background())
			require.NoError(t, err)
			assert.LessOrEqual(t, len(all), 64)
			assert.Greater(t, len(all), 64-64/8-1)
			latest := fmt.Sprint("new-", tc.noted-1)
			if tc.noted == 0 {
				latest = fmt.Sprint("old-", tc.stored-1)
			}
			assert.Contains(t, all, latest, "the most recently seen stays")
			require.NoError(t, d.Flush(context.Background()))
			assert.LessOrEqual(t, len(store.rows)-tc.stored, 64, "what was let go is not written either")
		})
	}
}
