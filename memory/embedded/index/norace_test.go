//go:build !race

package index

const raceOn = false
