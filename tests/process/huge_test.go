package process

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
	"github.com/vera-proxy/vera/ollama/ollamatest"
	"github.com/vera-proxy/vera/tests/veratest"
	"github.com/vera-proxy/vera/text"
)

// peakRSS reads a process's peak resident set (VmHWM) in MiB.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// A 10 MB message is answered, stored as its head and tail within
// max_turn_tokens with its count, and leaves vera small (before the cap, one such
// message made every later chat of its namespace take seconds and vera
// grow to a gigabyte).
func TestHugeMessageIsCappedAndVeraStaysSmall(t *testing.T) {
	up := ollamatest.New(t)
	data := t.TempDir()
	p := veratest.Launch(t, "VERA_OLLAMA_URL="+up.URL, "VERA_DATA_DIR="+data)
	huge := "BEGIN " + strings.Repeat("please summarise this log line for me ", 10<<20/38) + " FINISH"
	veratest.Chat(t, p, "big", false, veratest.User(huge))
	for i := range 5 {
		veratest.Chat(t, p, "big", false, veratest.User("short question "+strconv.Itoa(i)))
	}
	rss := peakRSS(t, p.Cmd.Process.Pid)
	t.Logf("vera's peak RSS after a 10 MB message and 5 chats: %d MiB (race detector: %v)", rss, veratest.Race)
	if !veratest.Race { // the race detector multiplies memory use
		assert.Less(t, rss, 200, "peak RSS in MiB")
	}
	p.Stop(t)

	db := veratest.OpenStore(t, data)
	ms, _, err := db.Scroll(context.Background(), memory.Filter{Namespace: "big"}, "", 100)
	require.NoError(t, err)
	require.Len(t, ms, 6)
	tok, err := text.NewTokenizer()
	require.NoError(t, err)
	for _, m := range ms {
		assert.Equal(t, tok.Count(m.Text), m.Tokens, "the count is stored with the turn")
		assert.LessOrEqual(t, m.Tokens, memory.DefaultMaxTurnTokens)
		if strings.Contains(m.Text, "BEGIN") {
			assert.Contains(t, m.Text, "[…]")
			assert.Contains(t, m.Text, "FINISH\nAssistant:", "the tail and the answer are kept")
		}
	}
}
