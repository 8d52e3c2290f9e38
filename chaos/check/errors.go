package check

import "errors"

// ErrBadValue is a record value that is not one the harness wrote: too short, another
// magic, or a checksum that does not match.
var ErrBadValue = errors.New("not a chaos record value")
