//go:build !race

package statement_test

const raceEnabled = false
