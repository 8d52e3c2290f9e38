package admin

import "sync"

// Znodes edited by hand into junk. A reader of the cluster state reads some znodes whole
// on every pass (the brokers' registrations, the topics); one whose content cannot be
// parsed is not taken as gone, which would be the worse error (a live broker taken for
// dead and its partitions moved while it still holds them; a topic whose partitions are
// no longer placed). The reader goes on with the last content it parsed, and logs the
// junk once per write of it (its znode's mzxid), not on every pass.

// lastGood is the last parsed content of a set of znodes (by name), and which of them
// hold junk now. Safe for concurrent use.
type lastGood[T any] struct {
	mu struct {
		sync.Mutex
		good map[string]T
		bad  map[string]int64 // name -> mzxid of the junk, as last reported
	}
}

// keep records v as name's content, readable again.
func (l *lastGood[T]) keep(name string, v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	l.mu.good[name] = v
	delete(l.mu.bad, name)
}

// junk records that name holds junk written at mzxid. It returns the last good content
// (ok false when none was read), and whether this junk is new (to be logged).
func (l *lastGood[T]) junk(name string, mzxid int64) (last T, ok, fresh bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	seen, had := l.mu.bad[name]
	l.mu.bad[name] = mzxid
	last, ok = l.mu.good[name]
	return last, ok, !had || seen != mzxid
}

func (l *lastGood[T]) initLocked() {
	if l.mu.good == nil {
		l.mu.good, l.mu.bad = map[string]T{}, map[string]int64{}
	}
}

// prune forgets every name not in names (znodes gone: a broker's session ended).
func (l *lastGood[T]) prune(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := make(map[string]bool, len(names))
	for _, n := range names {
		live[n] = true
	}
	for n := range l.mu.good {
		if !live[n] {
			delete(l.mu.good, n)
		}
	}
	for n := range l.mu.bad {
		if !live[n] {
			delete(l.mu.bad, n)
		}
	}
}

// unreadable returns how many of the znodes hold junk now.
func (l *lastGood[T]) unreadable() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.bad)
}
