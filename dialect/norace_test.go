//go:build !race

package dialect

const raceOn = false
