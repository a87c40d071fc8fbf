//go:build !linux

package journal

import "os"

// fdatasync is f.Sync where the system has no fdatasync (on macOS, Sync
// is F_FULLFSYNC).
func fdatasync(f *os.File) error { return f.Sync() }

// syncDir makes a new file's name in dir durable where the system can
// sync a directory; elsewhere (Windows) it cannot, and does not need to.
func syncDir(dir string) error {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
