package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/persist/hdfs"
)

// Distributed mode (docs/cluster.md): a real ZooKeeper and a real HDFS (MiniDFSCluster)
// as the tests run them (internal/peer), two `sluice admin` processes (one leads) and
// three brokers that follow their assignments, ship to HDFS and let C wait for it.

// The cluster's shape.
const (
	clusterBrokers = 3
	clusterAdmins  = 2
)

// cluster is the distributed mode's processes.
type cluster struct {
	zk      *zktest.Server
	hdfs    *hdfstest.Separate // NameNode and DataNodes in JVMs of their own: each can fail alone
	admins  []*admin
	brokers []*broker
}

// addrs returns every broker's address: the clients bootstrap from all of them.
func (c *cluster) addrs() []string {
	out := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		out[i] = b.addr
	}
	return out
}

// distributed is one run in distributed mode.
func (r *run) distributed(ctx context.Context) error {
	c := &cluster{}
	defer c.stopPeers()
	if err := r.startCluster(ctx, c); err != nil {
		return err
	}
	if err := createTopic(ctx, c.brokers[0].addr, r.cfg.Partitions); err != nil {
		return err
	}
	if err := waitPlaced(ctx, c.addrs(), nil); err != nil {
		return err
	}
	sctx, stopSupervising := context.WithCancel(ctx)
	exits := r.supervise(sctx, c.admins)
	defer func() {
		stopSupervising()
		r.res.Exits = append(r.res.Exits, <-exits...)
	}()
	fixed := c.addrs() // restarts keep the addresses
	stop := r.load(func() []string { return fixed })
	if err := r.faultLoop(ctx, r.distributedFaults(c)); err != nil {
		stop()
		return err
	}
	if err := r.finish(ctx, stop, c.addrs()); err != nil {
		return err
	}
	for _, b := range c.brokers {
		b.stop()
	}
	return nil
}

// startCluster starts ZooKeeper, HDFS, the admins and the brokers.
func (r *run) startCluster(ctx context.Context, c *cluster) error {
	var err error
	if c.zk, err = zktest.Run(r.mkdir("zk")); err != nil {
		return fmt.Errorf("cannot start ZooKeeper: %w", err)
	}
	r.logf("ZooKeeper serves on %s", c.zk.Addr)
	probe := func(addr string) error { return hdfs.Probe(addr, 5*time.Second) }
	if c.hdfs, err = hdfstest.RunSeparateN(r.mkdir("hdfs"), r.cfg.DataNodes, probe); err != nil {
		return fmt.Errorf("cannot start HDFS: %w", err)
	}
	r.logf("HDFS serves on %s (%d DataNodes)", c.hdfs.Addr, c.hdfs.DataNodes())
	for i := range clusterAdmins {
		a := &admin{name: fmt.Sprintf("admin-%d", i+1), ps: r.ps, argv: []string{r.cfg.Binary, "admin", "-zk", c.zk.Addr,
			"-zk-session-timeout", r.cfg.Session.String(), "-interval", "100ms"}}
		if err := a.start(); err != nil {
			return err
		}
		c.admins = append(c.admins, a)
	}
	for i := range clusterBrokers {
		name := fmt.Sprintf("broker-%d", i+1)
		b := &broker{name: name, ps: r.ps, argv0: []string{r.cfg.Binary}, data: r.mkdir(name),
			ready: filepath.Join(r.cfg.Dir, name+".ready"),
			args: append([]string{"-hdfs.addr", c.hdfs.Addr, "-hdfs.timeout", "5s", "-hdfs.commit_interval", "20ms",
				"-zk", c.zk.Addr, "-zk.session_timeout", r.cfg.Session.String()}, r.brokerArgs()...)}
		if err := b.start(ctx); err != nil {
			return err
		}
		r.logf("%s serves on %s", name, b.addr)
		c.brokers = append(c.brokers, b)
	}
	return nil
}

// stopPeers stops ZooKeeper and HDFS (the harness's own processes stop with the run).
func (c *cluster) stopPeers() {
	if c.hdfs != nil {
		c.hdfs.Stop()
	}
	if c.zk != nil {
		c.zk.Stop()
	}
}

// mkdir creates the run's subdirectory name and returns its path (a failure shows when
// the process using it starts).
func (r *run) mkdir(name string) string {
	d := filepath.Join(r.cfg.Dir, name)
	os.MkdirAll(d, 0o755)
	return d
}

// admin is one `sluice admin` process. Its fields are guarded by mu: the supervisor
// goroutine restarts an admin that exited by itself while the fault loop may kill one.
type admin struct {
	name string
	ps   *procs
	argv []string
	mu   struct {
		sync.Mutex
		p    *proc
		down bool // killed on purpose: not restarted by the supervisor
	}
}

// startLocked starts the admin's process.
func (a *admin) startLocked() error {
	p, err := a.ps.start(a.name, append(append([]string{}, a.argv...), "-id", a.name))
	a.mu.p, a.mu.down = p, false
	return err
}

// start starts the admin's process (again).
func (a *admin) start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startLocked()
}

// kill kills the admin's process on purpose.
func (a *admin) kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.down = true
	if a.mu.p != nil {
		a.mu.p.kill()
	}
}

// leading reports whether the admin's current process logged that it leads.
func (a *admin) leading() bool {
	a.mu.Lock()
	p := a.mu.p
	a.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(a.ps.logDir, a.name+".log"))
	if err != nil || p == nil || p.exited() {
		return false
	}
	s := string(b)
	cur := strings.LastIndex(s, fmt.Sprintf(" pid %d:", p.pid()))
	return cur >= 0 && strings.Contains(s[cur:], "admin leading")
}

// supervise restarts, until ctx ends, every admin that exited by itself, as a
// supervisor (systemd, a container runtime) would: `sluice admin` exits when it loses its
// ZooKeeper session. It returns the exits it saw once ctx has ended.
func (r *run) supervise(ctx context.Context, admins []*admin) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var exits []string
		for ctx.Err() == nil {
			for _, a := range admins {
				a.mu.Lock()
				if a.mu.p != nil && !a.mu.down && a.mu.p.exited() {
					e := fmt.Sprintf("%s exited by itself (%v): %s", a.name, a.mu.p.cmd.ProcessState, lastLine(r.ps, a.name))
					exits = append(exits, e)
					r.logf("%s; restarting it", e)
					if err := a.startLocked(); err != nil {
						r.logf("cannot restart %s: %v", a.name, err)
					}
				}
				a.mu.Unlock()
			}
			sleep(ctx, 200*time.Millisecond)
		}
		out <- exits
	}()
	return out
}

// lastLine returns the last line of a process's log.
func lastLine(ps *procs, name string) string {
	b, _ := os.ReadFile(filepath.Join(ps.logDir, name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
