package index

import (
	"syscall"
	"unsafe"
)

// hugePages asks that b, not yet touched, be backed by huge pages where
// the system has them (transparent huge pages, "madvise" mode): a start
// reads the snapshot's arrays into fresh memory, and on a virtual machine
// each first touch of a 4 KiB page can cost as much as copying 50 of them
// (tens of microseconds), a 2 MiB page about as much as one. Only the
// whole 2 MiB pages inside b are advised; a failure changes nothing but
// the speed.
func hugePages(b []byte) {
	const huge = 2 << 20
	if len(b) < 2*huge {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	lo := (p + huge - 1) &^ (huge - 1)
	hi := (p + uintptr(len(b))) &^ (huge - 1)
	if hi > lo {
		_ = syscall.Madvise(b[lo-p:hi-p], syscall.MADV_HUGEPAGE)
	}
}
