package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Result is what a run measured; it is what `--json` writes.
type Result struct {
	// Workload is produce, consume or e2e.
	Workload string `json:"workload"`
	// Name labels the run in reports (e.g. "produce-1k"); free text.
	Name   string    `json:"name,omitempty"`
	Config Config    `json:"config"`
	Start  time.Time `json:"start"`
	// Seconds is the measured time: from the first send (or the consumer's start) to the
	// last acknowledgment (or the last record read).
	Seconds float64 `json:"seconds"`
	// Records and Bytes count record values produced (produce) or read (consume, e2e);
	// Bytes are value bytes only, without keys, headers or protocol overhead.
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // 10^6 bytes per second
	// Latency is the end-to-end latency (e2e, consume from the tail) or the produce
	// acknowledgment latency (produce, where the driver reports acks); nil when none.
	Latency *Latency `json:"latency,omitempty"`
	// Breakdown splits an e2e run's latency into stages (breakdown.go).
	Breakdown *Breakdown `json:"breakdown,omitempty"`
	// CPU is the processor time of an e2e run's measured part (cpu.go).
	CPU *CPUUse `json:"cpu,omitempty"`
	// LatencySeries is an e2e run's latency over time, one point per 250 ms.
	LatencySeries []SeriesPoint `json:"latency_series,omitempty"`
	// Series is a produce run's MB/s of value bytes sent, one figure per second (sends,
	// not acknowledgments: a producer's buffer, at most 256 MiB here, lies between them).
	Series []float64 `json:"series_mb_per_sec,omitempty"`
	// Note says what bounded or cut the run, when something other than its settings did.
	Note string `json:"note,omitempty"`
	// Errors counts failed sends and reads; FirstError is the first one's text.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// BrokerRSS is the server's resident memory at its peak (VmHWM), in bytes, when the
	// harness started the server itself; 0 otherwise.
	BrokerRSS int64 `json:"broker_rss_bytes,omitempty"`
}

// finish computes the rates from the counts and the time.
func (r *Result) finish(elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
}

// Steady returns the mean MB/s of the second half of the run's Series: the rate once
// caches in front of the disk (the page cache's dirty limit, a producer's buffer) have
// filled. It is 0 without at least 4 seconds of series.
func (r *Result) Steady() float64 {
	if len(r.Series) < 4 {
		return 0
	}
	half := r.Series[len(r.Series)/2:]
	var sum float64
	for _, v := range half {
		sum += v
	}
	return sum / float64(len(half))
}

// WriteJSON writes r to path, indented.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Summary returns a one-line human summary of r.
func Summary(r *Result) string {
	s := fmt.Sprintf("%s %s: %d records in %.2fs: %.0f records/s, %.1f MB/s, %d errors",
		r.Config.System, r.Workload, r.Records, r.Seconds, r.RecordsPerSec, r.MBPerSec, r.Errors)
	if l := r.Latency; l != nil {
		s += fmt.Sprintf("; latency p50 %s p99 %s p99.9 %s max %s", fmtMicros(l.P50), fmtMicros(l.P99), fmtMicros(l.P999), fmtMicros(l.Max))
		if l.Corrected {
			s += " (corrected for coordinated omission)"
		}
	}
	if b := r.Breakdown; b != nil {
		for _, st := range []struct {
			name string
			l    *Latency
		}{{"schedule", b.Schedule}, {"transit", b.Transit}, {"delivery", b.Delivery}} {
			if st.l != nil {
				s += fmt.Sprintf("; %s p50 %s p99 %s", st.name, fmtMicros(st.l.P50), fmtMicros(st.l.P99))
			}
		}
		for _, name := range []string{stageClientQueue, stageRoundTrip, stageBrokerQueue, stageAppend, stageWake, stageSend} {
			if l := b.Stages[name]; l != nil {
				s += fmt.Sprintf("; %s p50 %s p99 %s", strings.ReplaceAll(name, "_", " "), fmtMicros(l.P50), fmtMicros(l.P99))
			}
		}
	}
	if c := r.CPU.String(); c != "" {
		s += "; cpu " + c
	}
	return s
}
