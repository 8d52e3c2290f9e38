package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// smallFS is a tmpfs mounted over the data directory in a user and mount namespace of
// the harness's own (`unshare -rm`: no root needed where unprivileged user namespaces
// are allowed). A holder process keeps the namespace alive; brokers enter it with
// nsenter, and the harness reaches the files through /proc/HOLDER/root. The disk-full
// fault shrinks the filesystem to what it holds (a remount), so the next segment file
// cannot be allocated, then grows it back: no ballast file, no memory taken.
type smallFS struct {
	dir    string // the mount point, as brokers see it
	size   int64  // its size outside the fault
	holder *proc
}

// fsMarker is created inside the tmpfs once it is mounted.
const fsMarker = ".chaos-tmpfs"

// newSmallFS mounts a tmpfs of size bytes over dir in a new namespace, or says why it
// cannot (the fault is then skipped with that reason).
func newSmallFS(ps *procs, dir string, size int64) (*smallFS, error) {
	for _, tool := range []string{"unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("cannot make a small filesystem: %w", err)
		}
	}
	script := `mount -t tmpfs -o size="$1" tmpfs "$0" && touch "$0/` + fsMarker + `" && exec sleep 2147483647`
	p, err := ps.start("tmpfs-holder", []string{"unshare", "-rm", "--propagation", "private", "sh", "-c", script, dir, strconv.FormatInt(size, 10)})
	if err != nil {
		return nil, err
	}
	fs := &smallFS{dir: dir, size: size, holder: p}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(fs.outside(), fsMarker)); err == nil {
			return fs, nil
		}
		if p.exited() || time.Now().After(deadline) {
			p.kill()
			log, _ := os.ReadFile(filepath.Join(ps.logDir, "tmpfs-holder.log"))
			return nil, fmt.Errorf("cannot mount a tmpfs in a user namespace (unshare -rm): %s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outside returns the mount point's path as the harness reaches it.
func (fs *smallFS) outside() string {
	return fmt.Sprintf("/proc/%d/root%s", fs.holder.pid(), fs.dir)
}

// enter returns the command prefix that runs a program inside the namespace.
func (fs *smallFS) enter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(fs.holder.pid()), "-U", "-m", "--preserve-credentials", "--"}
}

// resize remounts the tmpfs with size bytes.
func (fs *smallFS) resize(size int64) error {
	args := append(fs.enter(), "mount", "-o", "remount,size="+strconv.FormatInt(size, 10), fs.dir)
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot resize the tmpfs to %d bytes: %w: %s", size, err, out)
	}
	return nil
}

// fill shrinks the filesystem to what it holds plus slack bytes, and returns that size.
func (fs *smallFS) fill(slack int64) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs.outside(), &st); err != nil {
		return 0, fmt.Errorf("cannot stat the tmpfs: %w", err)
	}
	used := int64(st.Blocks-st.Bfree) * st.Bsize
	size := used + slack
	return size, fs.resize(size)
}

// heal gives the filesystem its size back.
func (fs *smallFS) heal() error { return fs.resize(fs.size) }
