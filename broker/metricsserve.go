package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsConfig serves the broker's Prometheus metrics, and pprof, over plain HTTP
// without authentication when Listen is set. Like the broker's own port, an address
// other than loopback is refused unless asked for: the metrics with Public (or the
// broker's Insecure), pprof only with Insecure. docs/security.md.
type MetricsConfig struct {
	// Listen is the address of /metrics: -metrics. Empty: no metrics served.
	Listen string
	// Pprof also serves /debug/pprof there: -pprof. Profiles show the heap and every
	// goroutine's stack, and a profile request makes the broker work for its length.
	Pprof bool
	// Public allows a Listen address other than loopback for the metrics alone (a
	// Prometheus scraping from another host): -metrics.public. Pprof still needs
	// Insecure there.
	Public bool
}

// Validate refuses a Listen address other than loopback that is not asked for (the
// admin's -metrics follows the same rule).
func (c *MetricsConfig) Validate(insecure bool) error {
	if c.Listen == "" || loopback(c.Listen) || insecure {
		return nil
	}
	if c.Pprof {
		return fmt.Errorf("metrics %s is not a loopback address and -pprof is on: anyone who reaches it reads the broker's heap and goroutine stacks and can make it profile itself, in plaintext without authentication; serve pprof on loopback (reach it with an SSH tunnel) or give -insecure",
			c.Listen)
	}
	if !c.Public {
		return fmt.Errorf("metrics %s is not a loopback address: anyone who reaches it reads the broker's metrics (topic names, rates, clients) in plaintext without authentication; give -metrics.public to serve them there anyway (a Prometheus scraping from another host), or serve them on loopback",
			c.Listen)
	}
	return nil
}

// Warning is what the start logs about a Listen address other than loopback, or "".
func (c *MetricsConfig) Warning() string {
	switch {
	case c.Listen == "" || loopback(c.Listen):
		return ""
	case c.Pprof:
		return "INSECURE: serving pprof on a non-loopback address, in plaintext without authentication: anyone who reaches it reads the heap and goroutine stacks"
	}
	return "serving metrics on a non-loopback address, in plaintext without authentication: firewall it to the scrapers"
}

// startMetrics serves the metrics when the configuration asks for them.
func (b *Broker) startMetrics() error {
	c := b.cfg.Metrics
	if c.Listen == "" {
		return nil
	}
	srv, addr, err := serveMetrics(c.Listen, b.cfg.Logger, b.Metrics(), c.Pprof)
	if err != nil {
		return err
	}
	b.metrics, b.metricsAddr = srv, addr
	if w := c.Warning(); w != "" {
		b.cfg.Logger.Warn(w, "metrics", addr, "pprof", c.Pprof)
	}
	b.cfg.Logger.Info("serving metrics", "addr", addr, "pprof", c.Pprof)
	return nil
}

// MetricsAddr returns the address the metrics are served on, or "" without them.
func (b *Broker) MetricsAddr() string { return b.metricsAddr }

// stopMetrics stops serving the metrics; a scrape under way ends first (for
// shutdownFlushWait at most, whatever is left of the shutdown's own time: it reads the
// arena, which goes next).
func (b *Broker) stopMetrics() {
	if b.metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownFlushWait)
	defer cancel()
	if err := b.metrics.Shutdown(ctx); err != nil {
		b.metrics.Close()
	}
}

// serveMetrics serves the collector (with the Go runtime's and the process's figures)
// on addr in the background until the server is shut down.
func serveMetrics(addr string, log *slog.Logger, c prometheus.Collector, withPprof bool) (*http.Server, string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("cannot serve metrics on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err) // the process goes on without them
		}
	}()
	return srv, ln.Addr().String(), nil
}
