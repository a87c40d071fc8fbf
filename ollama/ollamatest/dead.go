package ollamatest

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// DeadAddr returns a 127.0.0.1 address where Ollama is down: connecting is
// refused at once. Its port stays bound, never listened on, until t ends,
// so that no server of a test running meanwhile is handed it (closing a
// listener frees its port for the next one).
func DeadAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	in, ok := sa.(*syscall.SockaddrInet4)
	require.True(t, ok, "bound to %v", sa)
	return fmt.Sprintf("127.0.0.1:%d", in.Port)
}
