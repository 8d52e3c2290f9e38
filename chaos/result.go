package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"sluice/batch"
	"sluice/chaos/check"
)

// maxNotes bounds the notes kept per fault (the first ones: they show what a cycle did).
const maxNotes = 5

// FaultStat is what one fault did over a run.
type FaultStat struct {
	Name   string `json:"name"`
	Cycles int    `json:"cycles"`
	// Skipped says why the fault could not be injected on this machine ("" when it ran).
	Skipped string `json:"skipped,omitempty"`
	// Notes describe the first cycles (what was damaged, how long a pause lasted).
	Notes []string `json:"notes,omitempty"`
	// Recovery is each cycle's time from the heal to the first record persisted after it
	// (distributed mode: the failover time), in milliseconds.
	Recovery []int64 `json:"recovery_ms,omitempty"`
	// Failover is each cycle's time from the fault to the cluster's answer (distributed
	// mode: a dead or paused broker's partitions placed on the others; a new admin
	// leading), in milliseconds.
	Failover []int64 `json:"failover_ms,omitempty"`
}

// Result is a chaos run's outcome: the faults injected, the workload's figures and the
// checker's report.
type Result struct {
	Config  string        `json:"config"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Faults  []*FaultStat  `json:"faults"`
	// ProducerRestarts counts producers replaced after a call failed.
	ProducerRestarts int64 `json:"producer_restarts"`
	// Codecs counts the records the writers handed to their producers, by the codec the
	// producer compressed its batches with.
	Codecs map[string]int64 `json:"records_by_codec"`
	// Repairs counts `sluice segment repair` runs on damaged partitions.
	Repairs int `json:"repairs"`
	// Exits are admins that exited by themselves and were restarted, as a supervisor
	// would (an admin exits when it loses its ZooKeeper session): availability findings
	// that do not fail the run.
	Exits []string `json:"exits,omitempty"`
	// Errors are the harness's own failures (a broker that did not come back, a read-back
	// that did not finish): a run with any is not OK whatever the checker says.
	Errors []string      `json:"errors,omitempty"`
	Report *check.Report `json:"report"`
}

// OK reports whether the run found nothing its guarantees forbid and finished.
func (r *Result) OK() bool { return r.Report != nil && r.Report.OK && len(r.Errors) == 0 }

func (r *Result) fault(name string) *FaultStat {
	for _, f := range r.Faults {
		if f.Name == name {
			return f
		}
	}
	f := &FaultStat{Name: name}
	r.Faults = append(r.Faults, f)
	return f
}

// WriteTable prints the run: configuration, faults, then the checker's table.
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "sluice chaos: %s\nelapsed %v, producers replaced %d, partitions repaired %d\n",
		r.Config, r.Elapsed.Round(time.Second), r.ProducerRestarts, r.Repairs)
	codecs := make([]string, 0, len(r.Codecs))
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		if n, ok := r.Codecs[c.String()]; ok {
			codecs = append(codecs, fmt.Sprintf("%v %d", c, n))
		}
	}
	fmt.Fprintf(w, "records sent by codec: %s\n", strings.Join(codecs, ", "))
	fmt.Fprintf(w, "%-14s %7s  %s\n", "fault", "cycles", "")
	for _, f := range r.Faults {
		extra := ""
		switch {
		case f.Skipped != "":
			extra = "SKIPPED: " + f.Skipped
		case len(f.Recovery) > 0:
			extra = "to the next persisted record: " + distribution(f.Recovery)
		}
		if len(f.Failover) > 0 {
			extra = "failover: " + distribution(f.Failover) + "; " + extra
		}
		fmt.Fprintf(w, "%-14s %7d  %s\n", f.Name, f.Cycles, extra)
	}
	for _, e := range r.Exits {
		fmt.Fprintf(w, "EXITED (restarted): %s\n", e)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "HARNESS ERROR: %s\n", e)
	}
	if r.Report == nil {
		_, err := fmt.Fprintln(w, "FAIL: no check (the run did not reach its read-back)")
		return err
	}
	return r.Report.WriteTable(w)
}

// WriteJSON writes the run as one JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("cannot write result: %w", err)
	}
	return nil
}
