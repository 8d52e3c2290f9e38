// Package invariants reports whether the binary was built with the `invariants` build tag.
//
// Code guards expensive consistency checks with `if invariants.Enabled { ... }`; the
// constant lets the compiler drop them from ordinary builds. The test command builds with
// `-tags invariants`, so every test runs with the checks on. It holds no state.
package invariants
