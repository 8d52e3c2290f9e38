package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sluice/internal/loopport"
)

// broker is one `sluice broker` process of the run, restarted on the same data directory
// and address after each fault.
type broker struct {
	name string
	ps   *procs
	// argv0 is the command prefix: the sluice binary, or nsenter ... sluice when the data
	// directory is a small filesystem in a namespace of its own (diskfull.go).
	argv0 []string
	data  string // data directory as the broker sees it
	ready string // its ready file
	args  []string
	addr  string // 127.0.0.1:port once started
	// metrics is its metrics endpoint's host:port (a new port at every start).
	metrics string
	p       *proc
}

// errExited is a broker that exited before it served.
var errExited = errors.New("broker exited before serving")

// start runs the broker (on its first address again after a restart) and waits until it
// serves, at most a minute.
//
// The first start picks a port below the kernel's ephemeral range (loopport): the
// workload's clients keep opening connections, and one of them could take an ephemeral
// port while its broker is down between a kill and the restart. Before the first start
// the port is still ours to choose, so a broker whose port was taken between the pick
// and its bind is started again on another.
func (b *broker) start(ctx context.Context) error {
	if b.addr != "" {
		return b.startOn(ctx, b.addr)
	}
	for attempt := 1; ; attempt++ {
		listen, err := loopport.Addr()
		if err != nil {
			return fmt.Errorf("cannot start %s: %w", b.name, err)
		}
		err = b.startOn(ctx, listen)
		if err == nil {
			b.addr = listen // a restart keeps it: the workload's goroutines read it
			return nil
		}
		if attempt == bindAttempts || !errors.Is(err, errExited) || !b.logSays("cannot listen on "+listen) {
			return err
		}
	}
}

// bindAttempts bounds the first starts of a broker whose port was taken meanwhile.
const bindAttempts = 3

// logSays reports whether the broker's log holds s.
func (b *broker) logSays(s string) bool {
	raw, err := os.ReadFile(filepath.Join(b.ps.logDir, b.name+".log"))
	return err == nil && strings.Contains(string(raw), s)
}

// startOn runs the broker on listen and waits until it serves, at most a minute.
func (b *broker) startOn(ctx context.Context, listen string) error {
	os.Remove(b.ready)
	argv := append(append([]string{}, b.argv0...), "broker", "--data", b.data, "--listen", listen, "--ready-file", b.ready,
		"--metrics", "127.0.0.1:0")
	p, err := b.ps.start(b.name, append(argv, b.args...))
	if err != nil {
		return err
	}
	b.p = p
	deadline := time.Now().Add(time.Minute)
	for {
		if raw, err := os.ReadFile(b.ready); err == nil && len(raw) > 0 {
			f := strings.Fields(string(raw))
			if len(f) > 1 {
				b.metrics = f[1]
			}
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("cannot start %s: %w (%v); log %s", b.name, errExited, p.cmd.ProcessState,
				filepath.Join(b.ps.logDir, b.name+".log"))
		case <-ctx.Done():
			p.kill()
			return fmt.Errorf("cannot start %s: %w", b.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("cannot start %s: not serving after a minute", b.name)
		}
	}
}

// kill ends the broker with SIGKILL (a crash).
func (b *broker) kill() {
	if b.p != nil {
		b.p.kill()
		b.p = nil
	}
}

// stop ends the broker with SIGTERM (everything accepted becomes durable).
func (b *broker) stop() {
	if b.p != nil {
		b.p.stop(30 * time.Second)
		b.p = nil
	}
}

// partitionsIn returns how many partitions the broker's metrics show in state (such as
// "no_space").
func (b *broker) partitionsIn(state string) (int, error) {
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("cannot read metrics of %s: %w", b.name, err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sluice_partition_state{") && strings.Contains(line, `state="`+state+`"`) &&
			strings.HasSuffix(line, " 1") {
			n++
		}
	}
	return n, sc.Err()
}
