package testbroker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// binPrefix starts the name of the directory a test process builds its binary in:
// sluice-bin-<pid>-<random>.
const binPrefix = "sluice-bin-"

// sweep removes from root the build directories of test processes that have ended. A
// test binary has no hook at its exit (short of a TestMain in every package that starts
// brokers), and each directory holds a binary of about 50 MB, so without this every
// `go test` run left one per package behind. A directory is removed only when its
// process is gone (kill(pid, 0) answers ESRCH): a process alive, or of another user,
// keeps its own. Directories of another shape are left alone.
func sweep(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, binPrefix+"*"))
	for _, d := range dirs {
		pid, ok := pidOf(filepath.Base(d))
		if !ok || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// pidOf returns the pid in a build directory's name, sluice-bin-<pid>-<random>.
func pidOf(name string) (int, bool) {
	digits, _, ok := strings.Cut(strings.TrimPrefix(name, binPrefix), "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}
