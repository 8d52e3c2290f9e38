package memarena

import "sluice/internal/invariants"

// invariantsOn turns on the expensive checks (the invariants build tag):
// double releases and stale spans panic with "BUG: ...", freed chunks are
// poisoned, and every write buffer checks its bookkeeping after each change.
// Without it a bad release is counted in Stats.BadReleases and ignored.
const invariantsOn = invariants.Enabled
