//go:build race

package tests

// raceEnabled builds the binary under test with the race detector when the
// tests themselves run with -race.
const raceEnabled = true
