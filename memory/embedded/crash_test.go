package embedded

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vera-proxy/vera/memory"
)

// crashChildEnv makes the test binary act as a writer that is killed.
const crashChildEnv = "VERA_TEST_CRASH_CHILD"

// TestCrashChild is the child process of TestKill9LosesNoAcknowledgedWrite:
// it writes memories and queue entries one by one, printing each id once
// the write has returned, until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only runs as the child of the crash test")
	}
	ctx := context.Background()
	db, err := Open(ctx, dir)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		m := memory.Memory{
			ID: memory.NewID(), Namespace: fmt.Sprintf("ns%d", i%3), Type: memory.Raw,
			Text: fmt.Sprintf("User: fact number %d\nAssistant: noted %s", i, strings.Repeat("x", i%500)),
			Time: time.Now(), Vector: []float32{float32(i), 1, 2, 3},
		}
		kind := "M"
		if i%4 == 3 {
			kind = "Q"
			err = db.Enqueue(ctx, m)
		} else {
			err = db.Upsert(ctx, m)
		}
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, kind, m.ID)
		out.Flush()
	}
}

func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	var acked [][2]string
	for round, after := range []int{1, 37, 150, 400} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(stdout)
		n := 0
		for n < after && sc.Scan() {
			f := strings.Fields(sc.Text())
			require.Len(t, f, 2, "child: %s", sc.Text())
			require.NotEqual(t, "ERR", f[0], "child: %s", sc.Text())
			acked = append(acked, [2]string{f[0], f[1]})
			n++
		}
		// Killed mid-write: the child is still looping when the signal lands.
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		require.Equal(t, after, n, "round %d: child stopped early", round)
	}

	db, err := Open(ctx, dir)
	require.NoError(t, err, "the file must reopen after kill -9")
	defer db.Close()
	var integrity string
	require.NoError(t, db.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity))
	assert.Equal(t, "ok", integrity)
	queued, err := db.Pending(ctx, 1_000_000)
	require.NoError(t, err)
	inQueue := map[string]bool{}
	for _, m := range queued {
		inQueue[m.ID] = true
	}
	for _, a := range acked {
		if a[0] == "Q" {
			assert.True(t, inQueue[a[1]], "queued %s lost", a[1])
			continue
		}
		m, err := db.Get(ctx, a[1])
		if assert.NoError(t, err, "memory %s lost", a[1]) {
			assert.Len(t, m.Vector, 4)
		}
	}
	t.Logf("%d acknowledged writes over 4 kills, all present", len(acked))
}
