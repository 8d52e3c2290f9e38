package admin

import "sync/atomic"

// LeaderStats are an admin's figures for its metrics endpoint.
type LeaderStats struct {
	Leading    bool   // this admin leads now
	Passes     uint64 // placement passes run while leading
	Moves      uint64 // assignments written (a partition placed or moved)
	Repaired   uint64 // unreadable assignments written again as they last were
	Brokers    int    // live brokers at the last pass
	Partitions int    // partitions at the last pass
	Unplaced   int    // of which placed nowhere (no live broker)
	// UnreadableBrokers are live brokers whose registration holds junk (edited by hand):
	// taken as last read, or, never read good, kept with their partitions and given none.
	UnreadableBrokers int
	// UnreadableTopics are topics whose znode holds junk: taken as last read, or, never
	// read good, left out (their assignments stay as they are).
	UnreadableTopics int
}

// leaderStats are LeaderStats as the leader updates them.
type leaderStats struct {
	leading                  atomic.Bool
	passes, moves, repaired  atomic.Uint64
	brokers, parts, unplaced atomic.Int64
	badBrokers, badTopics    atomic.Int64
}

func (s *leaderStats) pass(brokers, parts, placed, badBrokers, badTopics int) {
	s.brokers.Store(int64(brokers))
	s.parts.Store(int64(parts))
	s.unplaced.Store(int64(parts - placed))
	s.badBrokers.Store(int64(badBrokers))
	s.badTopics.Store(int64(badTopics))
	s.passes.Add(1)
}

// Stats returns the admin's figures.
func (c *Cluster) Stats() LeaderStats {
	s := &c.stats
	return LeaderStats{Leading: s.leading.Load(), Passes: s.passes.Load(), Moves: s.moves.Load(),
		Repaired: s.repaired.Load(), Brokers: int(s.brokers.Load()), Partitions: int(s.parts.Load()),
		Unplaced: int(s.unplaced.Load()), UnreadableBrokers: int(s.badBrokers.Load()),
		UnreadableTopics: int(s.badTopics.Load())}
}
