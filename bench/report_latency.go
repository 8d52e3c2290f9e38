package bench

import "fmt"

// e2eRuns are the end-to-end measurements in report order, with their titles.
var e2eRuns = []struct{ m, title string }{
	{ME2EHalf, "half load, 4 partitions"},
	{ME2EHalf1P, "half load, 1 partition"},
	{ME2E10K, "10 000 records/s, 4 partitions"},
}

// latencyMarkdown writes the end-to-end latency tables: every run of every system, then
// where sluice's time went (the breakdown of breakdown.go).
func (s *Suite) latencyMarkdown(w func(string, ...any)) {
	w("\n### End-to-end latency\n\n")
	w("One producer and one consumer reading the tail, linger %v; latency from each record's intended send time (fixed-rate schedule, corrected for coordinated omission) to its arrival at the consumer, after a warm-up. %sEvery system's server is up for these runs, and each measurement runs on every system back to back (sluice, the relay, Kafka, NATS), so that the runs compared in a row follow each other within a minute, not the ten minutes between one system's runs and the next's. Before each run the harness has the kernel write back what the page cache holds dirty (sync(2)), so that no run pays for the writes of the run before it (Kafka's stay in the page cache past its run, gigabytes at half load). Half load is half of each system's own 1 KiB produce rate above; 10 000 records/s is the same for every system. **relay** is the ceiling: a process that passes the producer's bytes straight on to the consumer (`sluice bench relay`, bench/relay.go), at sluice's rate of each run with the same records and linger, so its latency is what this host gives any broker before the broker does any work (two processes, loopback TCP both ways, woken threads). **Cores used** is the processor time of the harness (producer and consumer) and of the server over the measured part, in cores, and **thread switches** their threads' voluntary context switches over it (each a thread that blocked and was woken: on a virtual machine each costs tens of µs of processor time, the machine line's wake cost) per record delivered, with the host's shares busy (anything, this run or not) and stolen by the hypervisor over the same time (`bench/cpu.go`): a tail on these two shared cores is mostly waiting for a core, and grows fast as the cores fill. The processes' times include time stolen while they ran, so under heavy steal a run looks heavier than it is.\n\n", e2eLinger, s.roundsText())
	w("| run | system | rate (records/s) | p50 | p99 | p99.9 | max | p99 of each round | p99 ÷ Kafka's | p99 ÷ relay's | cores used: harness + server | thread switches a record: harness + server | host busy / steal | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range e2eRuns {
		kafka, relay := s.Results["kafka"][run.m], s.Results["relay"][run.m]
		for _, sys := range []string{"sluice", "kafka", "nats", "relay"} {
			r := s.Results[sys][run.m]
			if r == nil || r.Latency == nil {
				continue
			}
			l := r.Latency
			rate := fmt.Sprintf("%.0f", r.Config.Rate)
			if r.RecordsPerSec < 0.95*r.Config.Rate {
				// The system could not deliver the rate with the latency settings: the
				// latencies are those of a backlog, not of the load asked for.
				rate += fmt.Sprintf(" (saturated: delivered %.0f)", r.RecordsPerSec)
			}
			vsKafka, vsRelay, name := "—", "—", sys
			if kafka != nil && kafka.Latency != nil && sys != "kafka" && sys != "relay" {
				vsKafka = fmt.Sprintf("%.2f", l.P99/kafka.Latency.P99)
			}
			if relay != nil && relay.Latency != nil && sys == "sluice" {
				vsRelay = fmt.Sprintf("%.2f", l.P99/relay.Latency.P99)
			}
			if sys == "relay" {
				name = "relay (ceiling)"
			}
			cores, host := cpuCells(r.CPU)
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", run.title, name, rate, fmtMicros(l.P50), fmtMicros(l.P99),
				fmtMicros(l.P999), fmtMicros(l.Max), s.roundsP99(sys, run.m), vsKafka, vsRelay, cores, switchesCell(r), host, r.Errors)
		}
	}
	w("\nWhere the time goes (p50 / p99 of each stage; see `bench/breakdown.go` and `bench/stages.go`). Per record, from the harness: **schedule** is the harness handing the record to the producer late (its own sleep overshoot, a full producer buffer), **transit** from the producer call to the consumer's poll returning it, **delivery** from that poll to the record (iterating the answer). Within transit, sluice's components time their own stages, per batch or request (so they do not add up to transit): the producer's **client queue** (a batch's first record to the request carrying it written: linger, a request slot) and **round trip** (a produce request written to its answer read: network both ways, broker queue and append); the broker's (sluice_request_stage_seconds) **broker queue** (a produce on its event loop before its handler), **append** (the produce handler), **wake** (an append that found long polls parked, to those polls answered: on the appending event loop when the partition's shard is idle, else the hop to that shard) and **send** (a fetch answer with records queued, to its last byte written).\n\n")
	w("| run | system | schedule | client queue | round trip | broker queue | append | wake | send | transit | delivery |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range e2eRuns {
		for _, sys := range []string{"sluice", "kafka", "nats", "relay"} {
			r := s.Results[sys][run.m]
			if r == nil || r.Breakdown == nil {
				continue
			}
			b := r.Breakdown
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", run.title, sys, stage(b.Schedule),
				stage(b.Stages[stageClientQueue]), stage(b.Stages[stageRoundTrip]), stage(b.Stages[stageBrokerQueue]),
				stage(b.Stages[stageAppend]), stage(b.Stages[stageWake]), stage(b.Stages[stageSend]),
				stage(b.Transit), stage(b.Delivery))
		}
	}
}

// cpuCells formats a run's processor use for the latency table: "1.64 = 0.86 + 0.78
// of 2" (harness + server, in cores) and "87 % / 4 %" (the host busy / stolen).
func cpuCells(u *CPUUse) (cores, host string) {
	cores, host = "—", "—"
	if u == nil || u.Wall <= 0 {
		return cores, host
	}
	h, sv := u.Harness/u.Wall, u.Server/u.Wall
	cores = fmt.Sprintf("%.2f = %.2f + %.2f of %d", h+sv, h, sv, u.Cores)
	if u.Server == 0 {
		cores = fmt.Sprintf("%.2f (harness) of %d", h, u.Cores)
	}
	if u.HostBusy > 0 {
		host = fmt.Sprintf("%.0f %% / %.0f %%", 100*u.HostBusy, 100*u.HostSteal)
	}
	return cores, host
}

// switchesCell formats a run's thread switches a record delivered: "1.9 + 1.8" (harness +
// server), "1.9 (harness)" without the server's.
func switchesCell(r *Result) string {
	u := r.CPU
	if u == nil || u.Wall <= 0 || u.HarnessSwitches <= 0 || r.RecordsPerSec <= 0 {
		return "—"
	}
	records := r.RecordsPerSec * u.Wall
	if u.ServerSwitches <= 0 {
		return perRecord(u.HarnessSwitches/records) + " (harness)"
	}
	return perRecord(u.HarnessSwitches/records) + " + " + perRecord(u.ServerSwitches/records)
}

// perRecord formats a count per record with two significant digits or more: at half
// load a process switches threads a few hundredths of a time a record.
func perRecord(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// stage formats a stage's p50 / p99.
func stage(l *Latency) string {
	if l == nil {
		return "—"
	}
	return fmtMicros(l.P50) + " / " + fmtMicros(l.P99)
}

// latencyGoals writes the latency goals of issue 14.
func (s *Suite) latencyGoals(w func(string, ...any)) {
	verdict := map[bool]string{true: "met", false: "**not met**"}
	median := ""
	if n := s.e2eRounds(); n > 1 {
		median = fmt.Sprintf(" (the round of sluice's median p99 of %d)", n)
	}
	for _, run := range e2eRuns {
		if r := s.Results["sluice"][run.m]; r != nil && r.Latency != nil {
			l := r.Latency
			w("- end-to-end p99 ≤ 1 ms and p99.9 ≤ 5 ms, %s%s: %s / %s — %s\n", run.title, median, fmtMicros(l.P99), fmtMicros(l.P999),
				verdict[l.P99 <= 1000 && l.P999 <= 5000])
		}
	}
	for _, run := range e2eRuns {
		r, k := s.Results["sluice"][run.m], s.Results["kafka"][run.m]
		if r != nil && r.Latency != nil && k != nil && k.Latency != nil {
			v := r.Latency.P99 / k.Latency.P99
			w("- end-to-end p99 ≤ ½ of Kafka's, %s%s: %.2f — %s\n", run.title, median, v, verdict[v <= 0.5])
		}
	}
}
