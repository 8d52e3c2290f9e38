package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"sluice/client"
	"sluice/wire"
)

// failoverLimit bounds the wait for a dead or paused broker's partitions to move.
const failoverLimit = time.Minute

// distributedFaults returns the faults of distributed mode on cluster c. A broker that
// exited by itself fails the run (an admin that did is restarted by the supervisor).
func (r *run) distributedFaults(c *cluster) map[string]func(context.Context) (string, error) {
	mix := r.clusterFaults(c)
	for name, f := range mix {
		mix[name] = func(ctx context.Context) (string, error) {
			note, err := f(ctx)
			for _, b := range c.brokers {
				if err == nil && b.p != nil && b.p.exited() {
					err = fmt.Errorf("%s exited by itself (%v) after fault %s: %s", b.name, b.p.cmd.ProcessState, name, lastLine(r.ps, b.name))
				}
			}
			return note, err
		}
	}
	return mix
}

// clusterFaults returns the faults themselves.
func (r *run) clusterFaults(c *cluster) map[string]func(context.Context) (string, error) {
	return map[string]func(context.Context) (string, error){
		"broker-kill":  func(ctx context.Context) (string, error) { return r.brokerDown(ctx, c, "broker-kill", false) },
		"broker-pause": func(ctx context.Context) (string, error) { return r.brokerDown(ctx, c, "broker-pause", true) },
		"broker-hang":  func(ctx context.Context) (string, error) { return r.brokerHang(ctx, c) },
		"admin-kill":   func(ctx context.Context) (string, error) { return r.adminKill(ctx, c) },
		"zk-restart": func(ctx context.Context) (string, error) {
			c.zk.Kill()
			d := time.Second + time.Duration(r.rng.Int64N(int64(time.Second)))
			sleep(ctx, d)
			if err := c.zk.StartAgain(); err != nil {
				return "", err
			}
			return fmt.Sprintf("ZooKeeper killed, started again after %v", d.Round(time.Millisecond)), nil
		},
		"hdfs-restart": func(ctx context.Context) (string, error) {
			return r.hdfsKill(ctx, c, "HDFS (NameNode and DataNodes)", c.hdfs.Kill)
		},
		// A hung HDFS, not a dead one: its sockets stay open and every call waits (the
		// brokers' HDFS timeout ends it), unlike a kill, whose calls fail at once.
		"hdfs-pause": func(ctx context.Context) (string, error) {
			return r.hdfsPause(ctx, "HDFS (NameNode and DataNodes)", c.hdfs.Pause, c.hdfs.Resume)
		},
		"nn-kill": func(ctx context.Context) (string, error) {
			return r.hdfsKill(ctx, c, "the NameNode", c.hdfs.KillNameNode)
		},
		"dn-kill": func(ctx context.Context) (string, error) {
			i := r.rng.IntN(c.hdfs.DataNodes())
			return r.hdfsKill(ctx, c, fmt.Sprintf("DataNode %d of %d", i+1, c.hdfs.DataNodes()),
				func() { c.hdfs.KillDataNodeAt(i) })
		},
		"nn-pause": func(ctx context.Context) (string, error) {
			return r.hdfsPause(ctx, "the NameNode", c.hdfs.PauseNameNode, c.hdfs.ResumeNameNode)
		},
		"dn-pause": func(ctx context.Context) (string, error) {
			i := r.rng.IntN(c.hdfs.DataNodes())
			return r.hdfsPause(ctx, fmt.Sprintf("DataNode %d of %d", i+1, c.hdfs.DataNodes()),
				func() { c.hdfs.PauseDataNodeAt(i) }, func() { c.hdfs.ResumeDataNodeAt(i) })
		},
		"clockjump": r.clockJump,
	}
}

// hdfsKill kills one of HDFS's processes (kill -9), leaves it down for --hdfs-outage and
// starts it again on its data.
func (r *run) hdfsKill(ctx context.Context, c *cluster, what string, kill func()) (string, error) {
	kill()
	sleep(ctx, r.cfg.HDFSOutage)
	t := time.Now()
	if err := c.hdfs.StartAgain(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s killed, down %v, then %v to start again", what, r.cfg.HDFSOutage, time.Since(t).Round(time.Second)), nil
}

// hdfsPause stops HDFS's processes named what (SIGSTOP) for --hdfs-outage.
func (r *run) hdfsPause(ctx context.Context, what string, pause, resume func()) (string, error) {
	pause()
	sleep(ctx, r.cfg.HDFSOutage)
	resume()
	return fmt.Sprintf("%s paused for %v", what, r.cfg.HDFSOutage), nil
}

// brokerDown kills (or, with pause, SIGSTOPs) a random broker, waits until its
// partitions have moved to the others (the failover time it records), then starts it
// again (or SIGCONTs it: it wakes past its session and must take no write for what
// moved).
func (r *run) brokerDown(ctx context.Context, c *cluster, fault string, pause bool) (string, error) {
	b := c.brokers[r.rng.IntN(len(c.brokers))]
	where, _ := placement(ctx, c.addrs()) // unreadable: counted as none
	held := len(where[b.addr])
	t := time.Now()
	if pause {
		if err := b.p.signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
	} else {
		b.kill()
	}
	err := waitPlaced(ctx, c.addrs(), map[string]bool{b.addr: true})
	failover := time.Since(t)
	if pause {
		sleep(ctx, time.Until(t.Add(r.cfg.Session+time.Second))) // past the session, even when it held nothing
		if cerr := b.p.signal(syscall.SIGCONT); err == nil {
			err = cerr
		}
	} else if serr := b.start(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return "", err
	}
	what := "killed (-9) and started again"
	if pause {
		what = fmt.Sprintf("paused for %v (session %v) and resumed", time.Since(t).Round(time.Millisecond), r.cfg.Session)
	}
	if held == 0 { // nothing to fail over: no failover time
		return fmt.Sprintf("%s %s; it held no partition", b.name, what), nil
	}
	f := r.res.fault(fault)
	f.Failover = append(f.Failover, failover.Milliseconds())
	return fmt.Sprintf("%s %s; its %d partitions moved after %v", b.name, what, held, failover.Round(time.Millisecond)), nil
}

// placement returns the partitions the metadata places on each broker, by address, or
// why the metadata could not be read.
func placement(ctx context.Context, addrs []string) (map[string][]int, error) {
	a, err := client.NewAdmin(client.Brokers(addrs...))
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ts, err := a.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(ts) != 1 {
		return nil, fmt.Errorf("metadata of %d topics, asked for one", len(ts))
	}
	held := map[string][]int{}
	for _, p := range ts[0].Partitions {
		if p.Addr != "" {
			held[p.Addr] = append(held[p.Addr], int(p.ID))
		}
	}
	return held, nil
}

// waitPlaced waits until the metadata gives every partition a broker outside avoid.
func waitPlaced(ctx context.Context, addrs []string, avoid map[string]bool) error {
	var live []string
	for _, a := range addrs {
		if !avoid[a] {
			live = append(live, a)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, failoverLimit)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(live...))
	if err != nil {
		return fmt.Errorf("cannot read metadata: %w", err)
	}
	defer a.Close()
	for {
		ts, err := a.Metadata(ctx, topic)
		if err == nil && len(ts) == 1 && placed(ts[0].Partitions, avoid) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("partitions not placed outside %v within %v (last error %v)", avoid, failoverLimit, err)
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

// placed reports whether every partition has a broker outside avoid.
func placed(parts []wire.Partition, avoid map[string]bool) bool {
	for _, p := range parts {
		if p.Addr == "" || avoid[p.Addr] {
			return false
		}
	}
	return true
}

// adminKill kills the leading admin, waits until the other leads, and starts the killed
// one again (it stands by).
func (r *run) adminKill(ctx context.Context, c *cluster) (string, error) {
	leader := c.admins[0]
	for _, a := range c.admins {
		if a.leading() {
			leader = a
		}
	}
	t := time.Now()
	leader.kill()
	var next *admin
	for next == nil {
		for _, a := range c.admins {
			if a != leader && a.leading() {
				next = a
			}
		}
		if time.Since(t) > failoverLimit {
			return "", fmt.Errorf("no admin leads %v after %s was killed", failoverLimit, leader.name)
		}
		sleep(ctx, 20*time.Millisecond)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	took := time.Since(t)
	r.res.fault("admin-kill").Failover = append(r.res.fault("admin-kill").Failover, took.Milliseconds())
	if err := leader.start(); err != nil {
		return "", err
	}
	return fmt.Sprintf("leader %s killed; %s leads after %v", leader.name, next.name, took.Round(time.Millisecond)), nil
}
