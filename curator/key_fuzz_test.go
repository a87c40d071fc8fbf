package curator

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The supersession key answers on any input, is stable (a key's key is
// itself), and takes time linear in its input: the input grown to 64 KiB
// is keyed well within a bound that only a quadratic step would reach.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"Home city", "home-city", "  HOME   city!! ", "日本語 キー", "\xff\xfe", "a", "", "city—of—residence"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := Key(s)
		assert.Equal(t, k, Key(k), "stable")
		assert.Equal(t, k, strings.TrimSpace(k))
		big := strings.Repeat(s+" ", (64<<10)/(len(s)+1)+1)
		done := make(chan struct{})
		go func() { defer close(done); Key(big); normalize(big) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("no key within 20s for 64 KiB: not linear")
		}
	})
}
