//go:build race

package index

// raceOn: under the race detector, sync.Pool drops a share of what is put
// back at random, so pooled buffers are allocated again now and then.
const raceOn = true
