package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
)

// Distributed mode (docs/cluster.md): a real ZooKeeper and a real HDFS (MiniDFSCluster)
// as the tests run them (internal/peer), two `sluice admin` processes (one leads) and
// three brokers that follow their assignments, ship to HDFS and let C wait for it.

// Cluster settings: a short session so that a dead or paused broker's partitions move
// within seconds (as test/cluster_test.go runs it).
const (
	sessionTimeout = 2 * time.Second
	clusterBrokers = 3
	clusterAdmins  = 2
)

// cluster is the distributed mode's processes.
type cluster struct {
	zk      *zktest.Server
	hdfs    *hdfstest.Cluster
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
	stop := r.load(c.addrs)
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
	if c.hdfs, err = hdfstest.Run(r.mkdir("hdfs")); err != nil {
		return fmt.Errorf("cannot start HDFS: %w", err)
	}
	r.logf("HDFS serves on %s", c.hdfs.Addr)
	for i := range clusterAdmins {
		a := &admin{name: fmt.Sprintf("admin-%d", i+1), ps: r.ps, argv: []string{r.cfg.Binary, "admin", "-zk", c.zk.Addr,
			"-zk-session-timeout", sessionTimeout.String(), "-interval", "100ms"}}
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
				"-zk", c.zk.Addr, "-zk.session_timeout", sessionTimeout.String()}, r.brokerArgs()...)}
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

// admin is one `sluice admin` process.
type admin struct {
	name string
	ps   *procs
	argv []string
	p    *proc
}

func (a *admin) start() error {
	p, err := a.ps.start(a.name, append(append([]string{}, a.argv...), "-id", a.name))
	a.p = p
	return err
}

// leading reports whether the admin's current process logged that it leads.
func (a *admin) leading() bool {
	b, err := os.ReadFile(filepath.Join(a.ps.logDir, a.name+".log"))
	if err != nil || a.p == nil || a.p.exited() {
		return false
	}
	s := string(b)
	cur := strings.LastIndex(s, fmt.Sprintf(" pid %d:", a.p.pid()))
	return cur >= 0 && strings.Contains(s[cur:], "admin leading")
}

// lastLine returns the last line of a process's log.
func lastLine(ps *procs, name string) string {
	b, _ := os.ReadFile(filepath.Join(ps.logDir, name+".log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
