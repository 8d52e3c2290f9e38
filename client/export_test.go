package client

// EarlyFetches returns how many fetch requests c's fetchers sent before the answer in
// front of them was read whole (a lane of one partition, fetch_multi version 1).
func EarlyFetches(c *Consumer) int64 { return c.earlyFetches.Load() }
