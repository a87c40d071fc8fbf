//go:build !linux

package embedded

import "os"

// fdatasync is f.Sync where the system has no fdatasync (on macOS, Sync
// is F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }
