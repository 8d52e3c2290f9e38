package bench

import "context"

// FetchPaths is the sluice broker's fetch bytes by path over part of a suite: from memory
// by writev (the copy path) and from its files by sendfile. The suite reads them around
// sluice's consume-from-memory rounds, so the report says where those rounds were served
// from instead of assuming it.
type FetchPaths struct {
	Copy     float64 `json:"copy_bytes"`
	Sendfile float64 `json:"sendfile_bytes"`
}

// The broker's counter series (broker/metrics.go).
const (
	seriesCopy     = `sluice_fetch_bytes_total{path="copy"}`
	seriesSendfile = `sluice_fetch_bytes_total{path="sendfile"}`
)

// scrapeFetchPaths reads the broker's fetch byte counters at addr (host:port).
func scrapeFetchPaths(ctx context.Context, addr string) (FetchPaths, error) {
	m, err := ScrapeCounters(ctx, addr, seriesCopy, seriesSendfile)
	if err != nil {
		return FetchPaths{}, err
	}
	return FetchPaths{Copy: m[seriesCopy], Sendfile: m[seriesSendfile]}, nil
}

// since returns the bytes sent by each path between before and f.
func (f FetchPaths) since(before FetchPaths) FetchPaths {
	return FetchPaths{Copy: f.Copy - before.Copy, Sendfile: f.Sendfile - before.Sendfile}
}
