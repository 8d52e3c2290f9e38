package testbroker

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sluice/internal/spawn"
)

// Run runs the sluice binary (Binary) with args and stdin, and returns its exit status
// and output. A command still running after a minute is killed by its pid and fails
// the test.
func Run(t testing.TB, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := spawn.Run(cmd) // dies with the test binary, which the minute's kill does not
	if ctx.Err() != nil {
		t.Fatalf("sluice %s did not finish within a minute\nstderr: %s", strings.Join(args, " "), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}
