package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"sluice/client"
	"sluice/wire"
)

// Embedded mode: one broker on local disk, no ZooKeeper, no HDFS; C advances with the
// group fsync (the broker's default policy).

// tmpfsSize bounds the small filesystem of the disk-full fault (a tmpfs takes memory
// only for what it holds).
const tmpfsSize = 2 << 30

// brokerArgs keep the broker small and make it roll segments often, so that damage
// hits sealed segments too, apply a one-hour retention by age every second (what the
// clockjump fault's timestamps must not trick), and set the configured fsync policy.
func (r *run) brokerArgs() []string {
	args := []string{"-arena.size", "256MiB", "-log.segment_bytes", "1MiB", "-log.retention", "1h",
		"-broker.retention_check", "1s"}
	if r.cfg.Fsync != "" {
		args = append(args, "-log.fsync", r.cfg.Fsync)
	}
	return args
}

// embedded is one run in embedded mode.
func (r *run) embedded(ctx context.Context) error {
	data := filepath.Join(r.cfg.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return fmt.Errorf("cannot create data directory: %w", err)
	}
	b := &broker{name: "broker", ps: r.ps, argv0: []string{r.cfg.Binary}, data: data,
		ready: filepath.Join(r.cfg.Dir, "broker.ready"), args: r.brokerArgs()}
	outside := data // the data directory as the harness reaches it
	var fs *smallFS
	if slices.Contains(r.cfg.Faults, "diskfull") {
		var err error
		if fs, err = newSmallFS(r.ps, data, tmpfsSize); err != nil {
			r.res.fault("diskfull").Skipped = err.Error()
			r.logf("diskfull skipped: %v", err)
		} else {
			b.argv0 = append(fs.enter(), r.cfg.Binary)
			outside = fs.outside()
		}
	}
	if err := b.start(ctx); err != nil {
		return err
	}
	r.logf("broker serves on %s (data %s)", b.addr, data)
	if err := createTopic(ctx, b.addr, r.cfg.Partitions); err != nil {
		return err
	}
	fixed := []string{b.addr} // a restart keeps the address
	addrs := func() []string { return fixed }
	stop := r.load(addrs)
	mix := r.embeddedFaults(b, outside, fs)
	if err := r.faultLoop(ctx, mix); err != nil {
		stop()
		return err
	}
	if err := r.finish(ctx, stop, addrs()); err != nil {
		return err
	}
	b.stop()
	return nil
}

// createTopic creates the workload's topic through the broker at addr.
func createTopic(ctx context.Context, addr string, partitions int) error {
	a, err := client.NewAdmin(client.Brokers(addr))
	if err != nil {
		return fmt.Errorf("cannot create topic: %w", err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := a.CreateTopic(ctx, topic, partitions, wire.TopicOptions{}); err != nil {
		return fmt.Errorf("cannot create topic: %w", err)
	}
	return nil
}

// embeddedFaults returns the faults of embedded mode on broker b, whose data directory
// the harness reaches at outside; fs is nil when disk full cannot be injected.
func (r *run) embeddedFaults(b *broker, outside string, fs *smallFS) map[string]func(context.Context) (string, error) {
	mix := map[string]func(context.Context) (string, error){
		"kill": func(ctx context.Context) (string, error) {
			b.kill()
			return "kill -9 and restart", b.start(ctx)
		},
		"pause": func(ctx context.Context) (string, error) {
			d := time.Second + time.Duration(r.rng.Int64N(int64(2*time.Second)))
			if err := b.p.signal(syscall.SIGSTOP); err != nil {
				return "", err
			}
			sleep(ctx, d)
			return fmt.Sprintf("SIGSTOP for %v", d.Round(time.Millisecond)), b.p.signal(syscall.SIGCONT)
		},
		"torn":      func(ctx context.Context) (string, error) { return r.damage(ctx, b, outside, torn) },
		"bitflip":   func(ctx context.Context) (string, error) { return r.damage(ctx, b, outside, bitflip) },
		"clockjump": r.clockJump,
	}
	if fs != nil {
		mix["diskfull"] = func(ctx context.Context) (string, error) {
			size, err := fs.fill(64 << 10)
			if err != nil {
				return "", err
			}
			d := 2*time.Second + time.Duration(r.rng.Int64N(int64(3*time.Second)))
			full := 0 // the most partitions seen refusing writes for want of space
			for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; sleep(ctx, 100*time.Millisecond) {
				if n, err := b.partitionsIn("no_space"); err == nil {
					full = max(full, n)
				}
			}
			return fmt.Sprintf("filesystem shrunk to %d bytes for %v: %d partitions answered no_space", size, d.Round(time.Millisecond), full),
				fs.heal()
		}
	}
	return mix
}

// damage kills the broker, damages one partition's files, repairs it as an operator
// would when the broker would refuse it, and restarts the broker. Every record the
// damage destroyed is told to the history.
func (r *run) damage(ctx context.Context, b *broker, outside string, kind damageKind) (string, error) {
	b.kill()
	part := r.rng.IntN(r.cfg.Partitions)
	dir := filepath.Join(outside, topic, strconv.Itoa(part))
	d, err := injectDamage(dir, kind, r.rng)
	if err != nil {
		return "", err
	}
	for _, id := range d.shadow {
		r.hist.Damaged(id)
	}
	at, err := repairDamage(r.cfg.Binary, dir)
	if err != nil {
		return "", err
	}
	if at >= 0 {
		r.res.Repairs++
		d.note += fmt.Sprintf("; repaired at offset %d", at)
		if at < d.from {
			d.note += " (BELOW the damage: the records between are not in the shadow)"
			d.from = at
		}
	}
	if d.from >= 0 {
		r.hist.Cut(part, d.from)
	}
	return fmt.Sprintf("partition %d: %s", part, d.note), b.start(ctx)
}
