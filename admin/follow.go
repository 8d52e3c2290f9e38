package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
)

// What a broker needs of the cluster state to follow its assignments (docs/cluster.md):
// one watch on ROOT/assignments, whose content the leader bumps after every pass that
// changed an assignment, so a broker re-reads the assignments once per change instead of
// keeping a watch on every partition's znode; the releases that make a move unload-first;
// and a cheap call that confirms the session (the broker's write lease).

// Generation is ROOT/assignments' content: bumped by the leader after each pass that
// changed an assignment.
type Generation struct {
	N uint64 `json:"generation"`
}

// AssignmentsW returns every partition's assignment and a channel that fires once when
// the leader next changes some (or the session's watches are lost: read again then).
func (c *Cluster) AssignmentsW() (map[PartitionID]Owned, <-chan zk.Event, error) {
	_, _, ch, err := c.conn.GetW(path.Join(c.root, "assignments"))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot watch the assignments: %w", err)
	}
	owners, err := c.Owners()
	if err != nil {
		return nil, nil, err
	}
	return owners, ch, nil
}

// bumpGeneration tells the brokers that assignments changed.
func (c *Cluster) bumpGeneration() error {
	p := path.Join(c.root, "assignments")
	data, st, err := c.conn.Get(p)
	if err != nil {
		return fmt.Errorf("cannot read the assignments' generation: %w", err)
	}
	var g Generation
	_ = json.Unmarshal(data, &g) // empty or junk: start again from 0
	g.N++
	out, _ := json.Marshal(g)
	if _, err := c.conn.Set(p, out, st.Version); err != nil {
		return fmt.Errorf("cannot bump the assignments' generation: %w", err)
	}
	return nil
}

// Release is a partition's release znode (ROOT/released/TOPIC/PARTITION): Broker holds
// nothing of the partition as of assignment epoch Epoch (it shipped everything it had
// to HDFS and stopped serving it). A broker that is assigned a partition moving from a
// live broker loads it only once that broker released it (unload before load).
// HDFSNext is the offset below which HDFS had acknowledged everything of the partition
// to the releasing broker (0: not known, as for a partition it never loaded): the loader
// checks that HDFS shows at least that much, so a handoff never silently drops
// acknowledged batches.
type Release struct {
	Broker   string `json:"broker"`
	Epoch    uint64 `json:"epoch"`
	HDFSNext int64  `json:"hdfs_next,omitempty"`
}

func (c *Cluster) releasePath(pid PartitionID) string {
	return path.Join(c.root, "released", pid.Topic, strconv.Itoa(pid.ID))
}

// Release records that broker holds nothing of pid as of assignment epoch, and that
// HDFS had acknowledged everything below hdfsNext to it (0: not known).
func (c *Cluster) Release(pid PartitionID, broker string, epoch uint64, hdfsNext int64) error {
	data, _ := json.Marshal(Release{Broker: broker, Epoch: epoch, HDFSNext: hdfsNext})
	p := c.releasePath(pid)
	_, err := c.conn.Set(p, data, -1)
	if errors.Is(err, zk.ErrNoNode) {
		if err = c.ensure(path.Dir(p)); err == nil {
			_, err = c.conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				_, err = c.conn.Set(p, data, -1)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("cannot release %s/%d: %w", pid.Topic, pid.ID, err)
	}
	return nil
}

// Released reads pid's release (ok false when none was written or it is unreadable).
func (c *Cluster) Released(pid PartitionID) (Release, bool, error) {
	data, _, err := c.conn.Get(c.releasePath(pid))
	if errors.Is(err, zk.ErrNoNode) {
		return Release{}, false, nil
	}
	if err != nil {
		return Release{}, false, fmt.Errorf("cannot read the release of %s/%d: %w", pid.Topic, pid.ID, err)
	}
	var r Release
	if json.Unmarshal(data, &r) != nil {
		return Release{}, false, nil
	}
	return r, true, nil
}

// SessionID returns the current ZooKeeper session's id (0 while there is none).
func (c *Cluster) SessionID() int64 { return c.conn.SessionID() }

// Registered reports whether broker id is registered (its session lives).
func (c *Cluster) Registered(id string) (bool, error) {
	ok, _, err := c.conn.Exists(path.Join(c.root, "brokers", id))
	if err != nil {
		return false, fmt.Errorf("cannot look up broker %s: %w", id, err)
	}
	return ok, nil
}

// Ping makes one round trip to ZooKeeper and checks that broker id's registration
// belongs to session (the caller's current one). A broker's write lease is measured
// from when a successful Ping was sent: ZooKeeper heard from the session after that, so
// the session cannot expire before that time plus the session timeout; and the broker
// is the one registered under its id, not a process that lost its registration to
// another with the same id.
func (c *Cluster) Ping(id string, session int64) error {
	ok, st, err := c.conn.Exists(path.Join(c.root, "brokers", id))
	if err != nil {
		return fmt.Errorf("ZooKeeper did not answer: %w", err)
	}
	if !ok || st.EphemeralOwner != session {
		return fmt.Errorf("broker %s is not registered by session %x", id, session)
	}
	return nil
}

// SessionTimeout returns the session timeout ZooKeeper granted (the server bounds what
// is asked by its minSessionTimeout and maxSessionTimeout), or the one asked for until
// the session is established.
func (c *Cluster) SessionTimeout() time.Duration {
	if ms := c.granted.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return c.asked
}

// WriteRaw overwrites the znode at rel (under the root) with data as given: for repair
// tools and for tests that corrupt the cluster state on purpose. Nothing checks data.
func (c *Cluster) WriteRaw(rel string, data []byte) error {
	if _, err := c.conn.Set(path.Join(c.root, rel), data, -1); err != nil {
		return fmt.Errorf("cannot write znode %s: %w", rel, err)
	}
	return nil
}
