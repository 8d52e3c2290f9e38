package memarena

// Tail returns the stream position where the next batch (or padding, Skip) goes: the
// engine checks its placements against it.
func (w *WriteBuffer) Tail() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.tailPos
}
