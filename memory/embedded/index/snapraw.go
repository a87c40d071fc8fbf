package index

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"unsafe"
)

// The snapshot's raw arrays: the slots' arrays and the postings are
// written as they lie in memory, and read back into arrays with room to
// grow.

// slotRoom is how many slots a loaded index has room for past its n
// without copying its arrays: an eighth more (a small namespace copies
// its few slots, and a store of many users keeps no room for thousands
// in each).
func slotRoom(n int) int {
	return n / 8
}

// dataRoom is the room a loaded list of n bytes of postings gets to grow
// in place: a quarter more, and at least 16 (a few postings).
func dataRoom(n int) int {
	if n == 0 {
		return 0
	}
	return max(n/4, 16)
}

// blockRoom is the room a loaded list of n blocks gets: a quarter more,
// and at least one (a block holds 64 postings, which dataRoom's 16 bytes
// do not fill).
func blockRoom(n int) int {
	if n == 0 {
		return 0
	}
	return n/4 + 1
}

// carve copies s to the end of *all, and returns the copy, its capacity
// reaching to the end of its room (room more values): appending to it
// fills its room, then moves it. *all must have room for both.
func carve[T any](all *[]T, s []T, room int) []T {
	if len(s) == 0 {
		return nil
	}
	at := len(*all)
	*all = append(*all, s...)
	end := at + len(s) + room
	*all = (*all)[:end]
	return (*all)[at : at+len(s) : end]
}

// raw views a slice of fixed-size values as its bytes.
func raw[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// readRaw reads n values of T written by raw. They must fit in what is
// left of the body: a damaged length, read before the checksum can be
// checked, must not allocate more than the file holds.
func readRaw[T any](r *snapReader, n int) []T {
	return readRoom[T](r, n, 0)
}

// readRoom is readRaw with room for more values after the n read (at
// most n more: a damaged dimension, which more is reckoned with, must not
// allocate more than the file's size again): a slot's array gets room for
// the slots added after the start, so that the first turns stored do not
// copy it whole (see grow).
func readRoom[T any](r *snapReader, n, more int) []T {
	if r.err != nil || n == 0 {
		return nil
	}
	var zero T
	if size := int64(unsafe.Sizeof(zero)); n < 0 || int64(n) > r.left/size {
		r.err = fmt.Errorf("%d values of %d bytes where %d bytes are left", n, size, r.left)
		return nil
	}
	s := hugeSlice[T](n, n+min(max(more, 0), n))
	if _, err := io.ReadFull(r.r, raw(s)); err != nil {
		r.err = err
	}
	r.left -= int64(len(raw(s)))
	return s
}

// snapReader reads a snapshot's body, keeping its first error; left is
// how many of its bytes are still to read.
type snapReader struct {
	r    *bufio.Reader
	err  error
	left int64
}

func (r *snapReader) u64() uint64 {
	var b [8]byte
	if r.err == nil {
		_, r.err = io.ReadFull(r.r, b[:])
		r.left -= 8
	}
	return binary.LittleEndian.Uint64(b[:])
}

// count is n as a length: at most one value a byte left in the body (a
// damaged length must not allocate terabytes).
func (r *snapReader) count(n uint64) int {
	if r.err == nil && n > uint64(max(r.left, 0)) {
		r.err = fmt.Errorf("a length of %d where %d bytes are left", n, r.left)
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *snapReader) bytes() []byte {
	return readRaw[byte](r, r.count(r.u64()))
}

// snapWriter writes a snapshot's body through a bufio.Writer, which keeps
// its first error: the writes fail together, at its Flush.
type snapWriter struct{ w *bufio.Writer }

func (w snapWriter) write(b []byte) { _, _ = w.w.Write(b) }

func (w snapWriter) writeString(s string) { _, _ = w.w.WriteString(s) }

func (w snapWriter) u64(v uint64) {
	w.write(binary.LittleEndian.AppendUint64(nil, v))
}

func (w snapWriter) bytes(b []byte) {
	w.u64(uint64(len(b)))
	w.write(b)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
