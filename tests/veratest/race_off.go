//go:build !race

package veratest

// Race tells whether the tests run with the race detector; the binary
// under test is built with it then too.
const Race = false
