//go:build race

package statement_test

// raceEnabled shrinks the generated bills under the race detector, which makes writing
// them about ten times slower.
const raceEnabled = true
