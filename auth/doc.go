// Package auth holds what the broker authenticates and authorizes with, as files an
// operator edits with `sluice user` and `sluice acl` (or, in distributed mode, the same
// contents in two znodes: Parse, and the Edits applied by admin.Cluster.EditSecurity):
// the users file (each user's
// SCRAM-SHA-256 credentials: salt, iteration count, StoredKey, ServerKey; never a
// password) and the ACL file (package acl's format), read together into an immutable
// Snapshot. The exchange itself is package scram's; the rules' evaluation package acl's.
//
// Users file format (one record a line; blank lines and lines starting with # ignored;
// base64 is standard base64 with padding):
//
//	key KEY
//	user NAME SCRAM-SHA-256 ITERATIONS SALT STOREDKEY SERVERKEY
//
// KEY is 32 random bytes (base64), written when the file is made: an unknown user is
// answered a salt derived from it and the user's name, so that its exchange looks like a
// known user's and fails the same way (a file without it derives one from its users'
// ServerKeys). NAME is 1 to 255 bytes of [a-zA-Z0-9._@-]; ITERATIONS at least 4096;
// SALT at least 8 bytes; STOREDKEY and SERVERKEY 32 bytes each. The file must not be
// readable by group or others (mode 0600): its keys let whoever reads them check
// password guesses offline and pose as the broker.
//
// Concurrency: a Snapshot and what it holds are immutable and safe for concurrent use.
package auth
