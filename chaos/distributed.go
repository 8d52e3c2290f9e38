package chaos

import (
	"context"
	"errors"
)

// errNotBuilt is a mode the harness does not run yet.
var errNotBuilt = errors.New("distributed mode is not built yet")

// distributed is one run in distributed mode.
func (r *run) distributed(ctx context.Context) error { return errNotBuilt }
