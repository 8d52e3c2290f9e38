package client

// EarlyFetches returns how many fetch requests c's fetchers sent before the answer in
// front of them was read whole (fetch_multi version 2, or 1 for a lane of one partition).
func EarlyFetches(c *Consumer) int64 { return c.earlyFetches.Load() }

// PinFetchVersion makes c's fetchers for broker addr ask for fetch_multi version v, as if
// the broker had refused the versions above; before c's first Poll.
func PinFetchVersion(c *Consumer, addr string, v uint16) {
	c.oldFetch = map[string]uint16{addr: v}
}

// Links returns how many brokers p keeps a sender for.
func Links(p *Producer) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.every)
}

// Shun tells a that a client found the broker at addr hung (Admin.shun).
func Shun(a *Admin, addr string) { a.shun(addr) }
