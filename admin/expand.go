package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"

	"github.com/go-zookeeper/zk"

	"sluice/wire"
)

// Expansion in ZooKeeper (docs/cluster.md, "Expansion"): the topic's znode gets the new
// partition count, V + 1 and the new layout appended to its history, in one conditional
// write; each partition of the old layout then records the offset at which it switched
// to the new one in ROOT/topics/TOPIC/switch/V/PARTITION, created once (by the broker
// that switched it, or by one that loaded it after V was written) and never changed.

// Layout is one partition layout in a topic's history: from version Version on, the
// topic has Partitions physical partitions.
type Layout struct {
	Version    uint32 `json:"version"`
	Partitions int    `json:"partitions"`
}

// Switch is a switch znode's content: the partition's records from Offset on were
// routed by the layout of the znode's version (or a later one), those below by an
// earlier one.
type Switch struct {
	Offset int64 `json:"offset"`
}

// Errors of ExpandTopic.
var (
	// ErrUnknownTopic: no such topic in ZooKeeper.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrNotMore: an expansion must raise the partition count (to at most 65536).
	ErrNotMore = errors.New("an expansion must raise the partition count")
	// ErrTopicChanged: the topic's znode changed between the read and the write (another
	// expansion won), or the last expansion has not finished switching.
	ErrTopicChanged = errors.New("the topic changed meanwhile")
)

// Layouts returns the topic's layouts, oldest first: its history, or, for a topic
// never expanded (written before histories were), its one current layout.
func (ti TopicInfo) Layouts() []Layout {
	if len(ti.History) > 0 {
		return ti.History
	}
	return []Layout{{Version: ti.Version, Partitions: ti.Partitions}}
}

// SwitchesDue returns the versions at which partition id of a topic with these layouts
// changed layout: every layout after the first whose previous layout had the partition.
func SwitchesDue(layouts []Layout, id int) []uint32 {
	var out []uint32
	for k := 1; k < len(layouts); k++ {
		if id < layouts[k-1].Partitions {
			out = append(out, layouts[k].Version)
		}
	}
	return out
}

// Expanded returns the topic info after raising ti's partition count to n: V + 1, the
// new layout appended to the history. It fails with ErrNotMore unless ti.Partitions < n
// <= 65536.
func Expanded(ti TopicInfo, n int) (TopicInfo, error) {
	if n <= ti.Partitions || n > wire.MaxPartitions {
		return ti, fmt.Errorf("%w: the topic has %d, asked for %d (at most %d)", ErrNotMore, ti.Partitions, n, wire.MaxPartitions)
	}
	if ti.Version == math.MaxUint32 { // the next version would wrap to 0, below the history's
		return ti, fmt.Errorf("the topic's layout version is %d, the last there is", ti.Version)
	}
	out := ti
	out.History = append(append([]Layout(nil), ti.Layouts()...), Layout{Version: ti.Version + 1, Partitions: n})
	out.Version, out.Partitions = ti.Version+1, n
	return out, nil
}

func (c *Cluster) topicPath(name string) string { return path.Join(c.root, "topics", name) }

func (c *Cluster) switchPath(topic string, version uint32, id int) string {
	return path.Join(c.topicPath(topic), "switch", strconv.FormatUint(uint64(version), 10), strconv.Itoa(id))
}

// Topic reads one topic's znode (ErrUnknownTopic when there is none) and its znode
// version.
func (c *Cluster) Topic(name string) (TopicInfo, int32, error) {
	data, st, err := c.conn.Get(c.topicPath(name))
	if errors.Is(err, zk.ErrNoNode) {
		return TopicInfo{}, 0, fmt.Errorf("cannot read topic %s: %w", name, ErrUnknownTopic)
	}
	if err != nil {
		return TopicInfo{}, 0, fmt.Errorf("cannot read topic %s: %w", name, err)
	}
	ti, err := parseTopic(data)
	if err != nil {
		return TopicInfo{}, 0, fmt.Errorf("cannot read topic %s: %w", name, err)
	}
	return ti, st.Version, nil
}

// parseTopic decodes and checks a topic's znode: a partition count in [1, 65536], and a
// history (when there is one) whose every count is in that range, whose versions and
// counts rise, and whose last layout is the current one.
func parseTopic(data []byte) (TopicInfo, error) {
	var ti TopicInfo
	if err := json.Unmarshal(data, &ti); err != nil {
		return ti, fmt.Errorf("unreadable topic znode: %w", err)
	}
	if err := CheckLayouts(ti.Version, ti.Partitions, ti.History); err != nil {
		return ti, fmt.Errorf("unreadable topic znode: %w", err)
	}
	return ti, nil
}

// CheckLayouts checks a topic's partition count and layout history (oldest first, or
// empty: one layout): every layout has 1 to wire.MaxPartitions partitions, each follows
// the one before with a higher version and more partitions, and the last is the current
// one (version, partitions). The admin's topic znode and a broker's topic.json both
// hold them.
func CheckLayouts(version uint32, partitions int, history []Layout) error {
	if partitions < 1 || partitions > wire.MaxPartitions {
		return fmt.Errorf("%d partitions", partitions)
	}
	for k, l := range history {
		if l.Partitions < 1 || l.Partitions > wire.MaxPartitions {
			return fmt.Errorf("layout %d has %d partitions", k, l.Partitions)
		}
		if k > 0 && (l.Version <= history[k-1].Version || l.Partitions <= history[k-1].Partitions) {
			return fmt.Errorf("layout %d (%+v) does not follow %+v", k, l, history[k-1])
		}
	}
	if n := len(history); n > 0 && (history[n-1] != Layout{Version: version, Partitions: partitions}) {
		return fmt.Errorf("the last layout %+v is not the current one (version %d, %d partitions)",
			history[n-1], version, partitions)
	}
	return nil
}

// ExpandTopic raises a topic's partition count to n (docs/cluster.md): its znode gets
// n, V + 1 and the new layout, written only if nothing changed it since it was read, and
// only once every partition of the last expansion has switched. Of two concurrent
// expansions one wins; the other fails with ErrTopicChanged (or ErrNotMore, when it
// reads the winner's count). The admin leader places the new partitions at its next pass.
func (c *Cluster) ExpandTopic(name string, n int) (TopicInfo, error) {
	ti, version, err := c.Topic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	next, err := Expanded(ti, n)
	if err != nil {
		return TopicInfo{}, fmt.Errorf("cannot expand topic %s: %w", name, err)
	}
	if ls := ti.Layouts(); len(ls) > 1 {
		prev := ls[len(ls)-2]
		done, err := c.switchCount(name, ti.Version, prev.Partitions)
		if err != nil {
			return TopicInfo{}, fmt.Errorf("cannot expand topic %s: %w", name, err)
		}
		if done < prev.Partitions {
			return TopicInfo{}, fmt.Errorf("cannot expand topic %s: %w: %d of the %d partitions of version %d have not switched to version %d yet",
				name, ErrTopicChanged, prev.Partitions-done, prev.Partitions, prev.Version, ti.Version)
		}
	}
	data, _ := json.Marshal(next)
	if _, err := c.conn.Set(c.topicPath(name), data, version); errors.Is(err, zk.ErrBadVersion) {
		return TopicInfo{}, fmt.Errorf("cannot expand topic %s: %w (another expansion won)", name, ErrTopicChanged)
	} else if err != nil {
		return TopicInfo{}, fmt.Errorf("cannot expand topic %s: %w", name, err)
	}
	c.log.Info("expanded topic", "topic", name, "partitions", n, "version", next.Version)
	if err := c.bumpGeneration(); err != nil { // brokers look at once: their old partitions switch
		c.log.Warn("topic expanded but the brokers not told: they find it at their next resync", "topic", name, "err", err)
	}
	return next, nil
}

// switchCount returns how many of the partitions [0, partitions) recorded their switch
// to version: the switches Layouts reports (switches), so znodes edited by hand (a name
// that is not a partition's spelling, content that is not a switch) do not count.
func (c *Cluster) switchCount(topic string, version uint32, partitions int) (int, error) {
	offs, err := c.switches(topic, version, partitions)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, off := range offs {
		if off >= 0 {
			n++
		}
	}
	return n, nil
}

// switches returns the offsets at which partitions [0, partitions) of topic recorded
// their switch to version, -1 for a switch not recorded or unreadable. A znode whose
// name is not one of those partitions, spelled as the switch paths spell it, was edited
// by hand and is left out.
func (c *Cluster) switches(topic string, version uint32, partitions int) ([]int64, error) {
	offs := make([]int64, partitions)
	for i := range offs {
		offs[i] = -1
	}
	dir := path.Dir(c.switchPath(topic, version, 0))
	kids, _, err := c.conn.Children(dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("cannot list the switches of %s to version %d: %w", topic, version, err)
	}
	for _, kid := range kids {
		id, ok := switchID(kid, partitions)
		if !ok {
			continue
		}
		off, ok, err := c.readSwitch(path.Join(dir, kid))
		if err != nil {
			return nil, fmt.Errorf("cannot read the switch of %s/%d to version %d: %w", topic, id, version, err)
		}
		if ok {
			offs[id] = off
		}
	}
	return offs, nil
}

// switchID returns the partition a switch znode's name spells, when it is one of
// [0, partitions) spelled as the switch paths spell it (parseID).
func switchID(name string, partitions int) (int, bool) {
	id, ok := parseID(name)
	return id, ok && id < partitions
}

// RecordSwitch records that partition id of topic switched to version at offset, unless
// a switch is recorded already: it returns the recorded offset (offset when this call
// recorded it). A switch is never changed once recorded.
func (c *Cluster) RecordSwitch(topic string, version uint32, id int, offset int64) (int64, error) {
	p := c.switchPath(topic, version, id)
	data, _ := json.Marshal(Switch{Offset: offset})
	_, err := c.conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNoNode) {
		if err = c.ensure(path.Dir(p)); err == nil {
			_, err = c.conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
		}
	}
	if err == nil {
		return offset, nil
	}
	if !errors.Is(err, zk.ErrNodeExists) {
		return 0, fmt.Errorf("cannot record the switch of %s/%d to version %d: %w", topic, id, version, err)
	}
	got, ok, err := c.readSwitch(p)
	if err == nil && !ok {
		err = errors.New("the recorded switch is unreadable")
	}
	if err != nil {
		return 0, fmt.Errorf("cannot read the switch of %s/%d to version %d: %w", topic, id, version, err)
	}
	return got, nil
}

// readSwitch reads a switch znode (ok false when it is missing or unreadable: logged).
func (c *Cluster) readSwitch(p string) (int64, bool, error) {
	data, _, err := c.conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	// The offset must be there: a znode of {} or null is not a switch recorded at 0.
	var s struct {
		Offset *int64 `json:"offset"`
	}
	if err := json.Unmarshal(data, &s); err != nil || s.Offset == nil || *s.Offset < 0 {
		c.log.Error("unreadable switch znode: taken as not recorded", "znode", p, "data", string(data), "err", err)
		return 0, false, nil
	}
	return *s.Offset, true, nil
}

// Layouts returns a topic's layouts with the switch offsets recorded so far, as the
// topic_layouts API answers them (-1 for a switch not recorded, or unreadable).
func (c *Cluster) Layouts(name string) ([]wire.Layout, error) {
	ti, _, err := c.Topic(name)
	if err != nil {
		return nil, err
	}
	ls := ti.Layouts()
	out := make([]wire.Layout, len(ls))
	for k, l := range ls {
		out[k] = wire.Layout{Version: l.Version, Partitions: uint32(l.Partitions)}
		if k == 0 {
			continue
		}
		if out[k].Switches, err = c.switches(name, l.Version, ls[k-1].Partitions); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Topics is TopicsW without a watch: for a caller whose watch has not fired yet but
// who wants the topics' current contents (a partition count raised by an expansion
// changes a topic's znode, not the topics' list).
func (c *Cluster) Topics() (map[string]TopicInfo, error) {
	names, _, err := c.conn.Children(path.Join(c.root, "topics"))
	if err != nil {
		return nil, fmt.Errorf("cannot list topics: %w", err)
	}
	return c.readTopics(names)
}
