package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// hangLimit bounds how long after a hung broker's partitions moved the clients may take
// to write and read them at their new broker. The clients give up on an answer after the
// long poll's wait plus twice the dial timeout (10.2-10.5 s with the workload's
// settings), so this leaves room for a loaded host, and it stays below the writers'
// opTimeout, which would otherwise replace a producer stuck on the hung broker and hide
// that its requests never timed out.
const hangLimit = 25 * time.Second

// brokerHang stops a broker that serves partitions (SIGSTOP) and keeps it stopped until
// the clients have moved on without it: once its partitions moved, a record must be
// persisted and the live consumer must read each of those partitions at its new broker,
// all while the broker is still stopped. A stopped broker neither answers nor resets its
// connections, so only the clients' own answer timeouts end their wait on it
// (RELIABILITY.md item 4). broker-pause cannot show that: it resumes the broker soon
// after the move, and the woken broker's not_owner answers move the clients on.
func (r *run) brokerHang(ctx context.Context, c *cluster) (string, error) {
	b, held := r.hangVictim(ctx, c)
	t := time.Now()
	if err := b.p.signal(syscall.SIGSTOP); err != nil {
		return "", err
	}
	err := waitPlaced(ctx, c.addrs(), map[string]bool{b.addr: true})
	moved := time.Now()
	var took time.Duration
	if err == nil {
		took, err = r.prog.movedOn(ctx, held, moved, hangLimit)
	}
	stopped := time.Since(t)
	if cerr := b.p.signal(syscall.SIGCONT); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("%s stopped for %v: %w", b.name, stopped.Round(time.Millisecond), err)
	}
	if len(held) == 0 {
		return fmt.Sprintf("%s stopped for %v and resumed; it held no partition", b.name, stopped.Round(time.Millisecond)), nil
	}
	f := r.res.fault("broker-hang")
	f.Failover = append(f.Failover, moved.Sub(t).Milliseconds())
	return fmt.Sprintf("%s stopped for %v and resumed; its partitions %v moved after %v, and were written and read at their new brokers %v later",
		b.name, stopped.Round(time.Millisecond), held, moved.Sub(t).Round(time.Millisecond), took.Round(time.Millisecond)), nil
}

// hangVictim picks a broker that serves partitions, at random, and returns it with them.
// A broker that has just woken from a pause may answer the metadata with no partition
// placed while it registers again, so the metadata is read again for a while before a
// broker that serves nothing is taken.
func (r *run) hangVictim(ctx context.Context, c *cluster) (*broker, []int) {
	for deadline := time.Now().Add(10 * time.Second); ; sleep(ctx, 200*time.Millisecond) {
		where, err := placement(ctx, c.addrs())
		var serving []*broker
		for _, b := range c.brokers {
			if len(where[b.addr]) > 0 {
				serving = append(serving, b)
			}
		}
		if len(serving) > 0 {
			b := serving[r.rng.IntN(len(serving))]
			return b, where[b.addr]
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.logf("broker-hang: no broker serves a partition (metadata error: %v)", err)
			return c.brokers[r.rng.IntN(len(c.brokers))], nil
		}
	}
}
