package local

// Size returns the bytes of all segments (persist.Store). The first call after Open sizes
// every sealed segment (a stat each); later calls are in memory.
func (l *Log) Size() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.totalLocked()
}
