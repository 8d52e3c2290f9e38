// Package failpoint injects panics at named points of the broker, for the tests that show
// a bug in one request's path is answered and counted and never takes the broker down.
// A real request cannot be made to hit a bug on cue, so this is the one fake those tests
// use.
//
// The points do nothing unless the binary is built with the tag `failpoints` (the test
// harness internal/testbroker builds it so); then SLUICE_FAILPOINTS, read once at
// start, lists `point=topic` pairs separated by commas: Panic(point, topic) panics for
// each listed pair, and On(point, topic) reports it listed (a fault the code meets by
// another path: "arena_miss" makes the reads an event loop runs inline find no records
// in memory, as if the arena had reclaimed them; "expiry_reread=cluster" holds a
// broker's reading of the cluster after its ZooKeeper session expired for 10 s, as a
// large cluster's reading would take).
package failpoint
