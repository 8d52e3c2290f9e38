package check

import (
	"encoding/json"
	"fmt"
	"io"
)

// Report is what Check found. Its JSON form is the report's machine-readable output.
type Report struct {
	// Sent is the number of records sent; Acks counts them by their strongest Ack.
	Sent int            `json:"sent"`
	Acks map[string]int `json:"acks"`
	// Reads is the number of reads, Repeats those of them that found at or below C what
	// the last such read of the position found (counted, not kept: repeats.go);
	// Distinct the records read at or below C.
	Reads    int `json:"reads"`
	Repeats  int `json:"repeats"`
	Distinct int `json:"distinct"`
	// Counts has every anomaly of Forbidden and Allowed, zeros included.
	Counts map[string]int `json:"counts"`
	// Examples holds up to ten descriptions of each anomaly found.
	Examples map[string][]string `json:"examples,omitempty"`
	// OK is true when every forbidden count is 0.
	OK bool `json:"ok"`
}

func newReport() *Report {
	r := &Report{Acks: map[string]int{}, Counts: map[string]int{}, Examples: map[string][]string{}, OK: true}
	for _, a := range append(append([]string{}, Forbidden...), Allowed...) {
		r.Counts[a] = 0
	}
	for _, a := range ackNames {
		r.Acks[a] = 0
	}
	return r
}

// add counts one anomaly and keeps its description as an example while there is room.
func (r *Report) add(anomaly, format string, args ...any) {
	r.Counts[anomaly]++
	if len(r.Examples[anomaly]) < maxExamples {
		r.Examples[anomaly] = append(r.Examples[anomaly], fmt.Sprintf(format, args...))
	}
	for _, f := range Forbidden {
		if f == anomaly {
			r.OK = false
		}
	}
}

// WriteTable prints the summary table, the examples of what was found and the verdict.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "records sent %d (persisted %d, accepted %d, unknown %d, failed %d); reads %d (%d of them repeats), distinct records read %d\n",
		r.Sent, r.Acks["persisted"], r.Acks["accepted"], r.Acks["unknown"], r.Acks["failed"], r.Reads, r.Repeats, r.Distinct)
	fmt.Fprintf(w, "%-16s %-10s %10s\n", "anomaly", "kind", "count")
	rows := func(names []string, kind string) {
		for _, a := range names {
			fmt.Fprintf(w, "%-16s %-10s %10d\n", a, kind, r.Counts[a])
		}
	}
	rows(Forbidden, "forbidden")
	rows(Allowed, "allowed")
	for _, a := range append(append([]string{}, Forbidden...), Allowed...) {
		for _, e := range r.Examples[a] {
			fmt.Fprintf(w, "  %s: %s\n", a, e)
		}
	}
	verdict := "OK: every forbidden count is 0"
	if !r.OK {
		verdict = "FAIL: a forbidden anomaly was found"
	}
	_, err := fmt.Fprintln(w, verdict)
	return err
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("cannot write report: %w", err)
	}
	return nil
}
