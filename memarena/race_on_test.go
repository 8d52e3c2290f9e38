//go:build race

package memarena

const raceEnabled = true
