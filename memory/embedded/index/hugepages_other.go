//go:build !linux

package index

// hugePages does nothing where the system has no transparent huge pages
// to ask for.
func hugePages([]byte) {}
