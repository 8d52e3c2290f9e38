package broker

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Figure is one unlabelled sample for ServeFigures.
type Figure struct {
	Name, Help string
	Value      float64
	Counter    bool // a counter; else a gauge
}

// ServeFigures serves /metrics on addr for a process that is not a broker (`sluice
// admin`): collect is called at every scrape. This package owns the Prometheus library
// (one place imports it), hence this helper here. It returns the address it listens on;
// the server runs until the process ends.
func ServeFigures(addr string, log *slog.Logger, collect func() []Figure) (string, error) {
	_, served, err := serveMetrics(addr, log, figureCollector(collect), false)
	return served, err
}

// figureCollector turns the figures into samples at scrape time (an unchecked
// collector: the set of names may change between scrapes).
type figureCollector func() []Figure

// Describe sends nothing: the collector is unchecked.
func (f figureCollector) Describe(chan<- *prometheus.Desc) {}

// Collect sends every figure.
func (f figureCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range f() {
		kind := prometheus.GaugeValue
		if x.Counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(x.Name, x.Help, nil, nil), kind, x.Value)
	}
}
