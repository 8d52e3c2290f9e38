package broker

import (
	"errors"
	"time"
)

// reopenInterval is how often a partition left offline because HDFS could not be read
// at load is tried again.
const reopenInterval = 2 * time.Second

// reopenLoop opens, once HDFS answers, the partitions that could not be opened because
// it did not (a partition with no local data must continue after HDFS's end, which only
// HDFS knows): a broker started during an HDFS outage serves them when HDFS is back,
// without a restart. Outside a cluster only; in a cluster a failed load is retried by
// the load itself (takeOver).
func (b *Broker) reopenLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(reopenInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, pt := range b.waitingForHDFS() {
			b.reopen(pt)
		}
	}
}

// waitingForHDFS lists the partitions offline because HDFS could not be read.
func (b *Broker) waitingForHDFS() []*part {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []*part
	for _, t := range b.mu.topics {
		for _, pt := range t.parts {
			if pt.p == nil && errors.Is(pt.offline, errHDFSUnreadable) {
				out = append(out, pt)
			}
		}
	}
	return out
}

// reopen tries to open an offline partition again; on success it is swapped in and
// shipped. A failure leaves it offline (logged at most once a minute).
func (b *Broker) reopen(old *part) {
	m := old.topic.meta
	opts, err := b.logOptions(m.Options)
	if err != nil {
		return // not an HDFS matter: stays offline
	}
	p, err := b.openPartition(m, old.id, opts, b.readTail(m.Name, old.id))
	if err != nil {
		if ok, n := old.answerLog.allow(time.Now()); ok {
			b.cfg.Logger.Warn("partition still offline", "topic", m.Name, "partition", old.id, "err", err, "suppressed", n)
		}
		return
	}
	nw := b.newPart(old.topic, old.id)
	nw.p = p
	b.swapPart(old, nw)
	b.ship(nw)
	b.cfg.Logger.Info("partition opened now that HDFS answers", "topic", m.Name, "partition", old.id)
}
