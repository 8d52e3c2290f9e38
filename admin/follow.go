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

// parseGeneration decodes ROOT/assignments' content. It refuses what is not an object
// with a generation that is a whole number from 0 to the largest uint64: JSON that
// does not decode into Generation (a negative, fractional or too large number, a
// string), and null or an object without the field, which decode without an error but
// say nothing. Only bumpGeneration reads it, and it starts again from 0 on anything
// refused, as it does on the empty content ensure creates the znode with: the brokers
// watch the znode for a change, never its value.
func parseGeneration(data []byte) (Generation, error) {
	var g struct {
		N *uint64 `json:"generation"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		return Generation{}, fmt.Errorf("unreadable generation znode: %w", err)
	}
	if g.N == nil {
		return Generation{}, fmt.Errorf("unreadable generation znode: no generation in %.40q", data)
	}
	return Generation{N: *g.N}, nil
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
	g, _ := parseGeneration(data) // empty or junk: start again from 0
	// The largest generation wraps to 0: the brokers only watch for a change.
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

// Released reads pid's release (ok false when none was written or parseRelease refuses
// it).
func (c *Cluster) Released(pid PartitionID) (Release, bool, error) {
	data, _, err := c.conn.Get(c.releasePath(pid))
	if errors.Is(err, zk.ErrNoNode) {
		return Release{}, false, nil
	}
	if err != nil {
		return Release{}, false, fmt.Errorf("cannot read the release of %s/%d: %w", pid.Topic, pid.ID, err)
	}
	r, err := parseRelease(data)
	if err != nil {
		return Release{}, false, nil
	}
	return r, true, nil
}

// parseRelease decodes and checks a partition's release znode. It refuses what no
// broker writes; Released answers a refused znode as one that is not JSON: no release
// (the new owner waits for another release or for the releasing broker to be gone, and
// the leader takes that broker for the holder of a move):
//   - a broker id no broker can register under (validBrokerID: a broker releases under
//     its own registered id);
//   - an epoch no assignment has (validEpoch: a broker releases as of the epoch of the
//     assignment that moved the partition away);
//   - a negative hdfs_next (an offset, or 0 when not known). The loader ignores any
//     value not above 0, so a negative one would have been taken for "not known": a
//     release edited by hand is not trusted to say what HDFS acknowledged.
func parseRelease(data []byte) (Release, error) {
	var r Release
	if err := json.Unmarshal(data, &r); err != nil {
		return Release{}, fmt.Errorf("unreadable release znode: %w", err)
	}
	if !validBrokerID(r.Broker) || !validEpoch(r.Epoch) || r.HDFSNext < 0 {
		return Release{}, fmt.Errorf("unreadable release znode: broker %q, epoch %d, hdfs_next %d", r.Broker, r.Epoch, r.HDFSNext)
	}
	return r, nil
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
