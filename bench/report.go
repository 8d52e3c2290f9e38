package bench

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Markers delimit the generated section of BENCHMARKS.md; everything outside them is
// written by hand and kept as it is.
const (
	SectionBegin = "<!-- bench:begin -->"
	SectionEnd   = "<!-- bench:end -->"
)

// RewriteSection returns doc with the text between the markers replaced by section (the
// markers are kept), or with the markers and section appended when doc has none.
func RewriteSection(doc, section string) string {
	return rewriteBetween(doc, SectionBegin, SectionEnd, section, "")
}

// Markers of the generated section of a narrow run (SuiteOptions.Only or Systems), kept
// apart from the full run's so that a narrow run never erases it.
const (
	NarrowBegin = "<!-- bench-narrow:begin -->"
	NarrowEnd   = "<!-- bench-narrow:end -->"
)

// RewriteNarrowSection is RewriteSection for a narrow run's section, placed before the
// full run's when it is new.
func RewriteNarrowSection(doc, section string) string {
	return rewriteBetween(doc, NarrowBegin, NarrowEnd, section, SectionBegin)
}

// rewriteBetween returns doc with the text between the markers begin and end replaced by
// section (the markers are kept). When doc has no such markers, the markers and section
// go before the line holding anchor, or at the end when anchor is "" or not found.
func rewriteBetween(doc, begin, end, section, anchor string) string {
	block := begin + "\n" + strings.TrimRight(section, "\n") + "\n" + end + "\n"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i >= 0 && j > i {
		rest := doc[j+len(end):]
		rest = strings.TrimPrefix(rest, "\n")
		return doc[:i] + block + rest
	}
	if k := strings.Index(doc, anchor); anchor != "" && k >= 0 {
		k = strings.LastIndex(doc[:k], "\n") + 1
		return doc[:k] + block + "\n" + doc[k:]
	}
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	if doc != "" {
		doc += "\n"
	}
	return doc + block
}

// Machine describes the host of a run.
type Machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory string `json:"memory"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Java   string `json:"java,omitempty"`
	// Wake is what a thread's wake-up cost when the run started (wake.go); nil if it
	// could not be measured.
	Wake *WakeCost `json:"wake,omitempty"`
}

// markdown describes the machine in one line of the reports: who shares its cores
// (sharers), and the load average (load, "" if unknown).
func (m Machine) markdown(sharers, load string) string {
	line := fmt.Sprintf("**Machine:** %s, %d cores, %s RAM, Linux %s, %s", m.CPU, m.Cores, m.Memory, m.Kernel, m.Go)
	if m.Java != "" {
		line += ", " + m.Java
	}
	line += ". " + sharers + " share the same cores, over 127.0.0.1"
	if load != "" {
		line += "; " + load
	}
	if m.Wake != nil {
		line += "; " + m.Wake.markdown()
	}
	return line + "."
}

// DescribeMachine reads the host's description from /proc and the tools' versions.
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			var kb int64
			fmt.Sscan(f[1], &kb)
			m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m.Java = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	// 2 000 wakes: a fraction of a second, at the start, before any server runs.
	if w, err := MeasureWake(2000, 50*time.Microsecond); err == nil {
		m.Wake = &w
	}
	return m
}

// mbps returns a measurement's MB/s, 0 when it is missing.
func (s *Suite) mbps(system, m string) float64 {
	if r := s.Results[system][m]; r != nil && r.Errors == 0 {
		return r.MBPerSec
	}
	return 0
}

// ceilingOf names the ceiling a measurement is compared with.
// A consume right after a restart has none: it reads from wherever each server left its
// data (sluice's segments from the disk), and no ceiling of that is measured.
func ceilingOf(m string) string {
	switch m {
	case MConsumePage:
		return "sendfile"
	case MConsumeRestart:
		return ""
	}
	return "tcp"
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func cell(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}

var measureTitles = []struct{ m, title string }{
	{MProduce1K, "produce, 1 KiB records"},
	{MProduce100, "produce, 100 B records"},
	{MConsumeRestart, "consume right after a restart (sluice: from the disk)"},
	{MConsumePage, fmt.Sprintf("consume from the page cache (after a restart, the files read first; median of %d runs)", consumeRounds)},
	{MConsumeMem, "consume from memory (after producing)"},
}

// Markdown renders the generated section of BENCHMARKS.md; charts are the chart files'
// paths relative to BENCHMARKS.md.
func (s *Suite) Markdown(charts []string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	kind := "make bench"
	if s.Quick {
		kind = "make bench-quick (small counts: indicative only)"
	}
	if len(s.Only) > 0 || len(s.Systems) > 0 {
		w("## A narrow run of the side-by-side suite (generated)\n\n")
	} else {
		w("## sluice, Kafka and NATS JetStream side by side (generated)\n\n")
	}
	w("Generated by `%s` (package `bench`, `scripts/bench-all`) on %s; do not edit between the markers.\n\n", kind, s.Start.UTC().Format(time.RFC3339))
	w("%s\n\n", s.Machine.markdown("Clients, servers and ceilings", s.loadNote()))
	if s.NewOnly {
		w("**This run measured only the disk ceilings and the sustained runs** (`benchsuite -new-only`): the burst, consume and latency tables are empty.\n\n")
	}
	if len(s.Only) > 0 || len(s.Systems) > 0 {
		w("**A narrow run** (`ONLY=%s SYSTEMS=%s`, `benchsuite -only -systems`): only those parts and servers were measured; the other tables are empty.\n\n",
			strings.Join(s.Only, ","), strings.Join(s.Systems, ","))
	}
	w("### Burst throughput (MB/s of record values, 10^6 B/s)\n\n")
	w("| measurement | sluice | Kafka | NATS | ceiling | sluice/Kafka | sluice/NATS | sluice/ceiling |\n|---|---|---|---|---|---|---|---|\n")
	for _, mt := range measureTitles {
		sl, k, n, c := s.mbps("sluice", mt.m), s.mbps("kafka", mt.m), s.mbps("nats", mt.m), s.mbps(ceilingOf(mt.m), mt.m)
		ceil := "—"
		if name := ceilingOf(mt.m); name != "" {
			ceil = cell(c) + " (" + name + ")"
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", mt.title, cell(sl), cell(k), cell(n), ceil,
			ratio(sl, k), ratio(sl, n), ratio(sl, c))
	}
	w("\nRecords/s of the same runs:\n\n| measurement | sluice | Kafka | NATS | ceiling |\n|---|---|---|---|---|\n")
	for _, mt := range measureTitles {
		w("| %s |", mt.title)
		for _, sys := range []string{"sluice", "kafka", "nats", ceilingOf(mt.m)} {
			if r := s.Results[sys][mt.m]; sys != "" && r != nil {
				w(" %.0f |", r.RecordsPerSec)
			} else {
				w(" — |")
			}
		}
		w("\n")
	}
	var runs []string
	for _, sys := range []string{"sluice", "kafka", "nats", ceilingOf(MConsumePage)} {
		if r := s.Results[sys][MConsumePage]; r != nil && r.Note != "" {
			runs = append(runs, sys+": "+r.Note)
		}
	}
	if len(runs) > 0 {
		w("\nConsume from the page cache, every run: %s.\n", strings.Join(runs, "; "))
	}
	w("\n")
	s.sustainedMarkdown(w)
	s.latencyMarkdown(w)
	w("\n### Broker memory\n\nPeak resident set (VmHWM) of each server over its burst, consume and latency runs (the largest of its processes: before the restart, after it, and the one the latency runs start).\n\n| system | peak RSS |\n|---|---|\n")
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		if v := s.RSS[sys]; v > 0 {
			w("| %s | %.0f MiB |\n", sys, float64(v)/(1<<20))
		} else {
			w("| %s | — %s |\n", sys, s.skipNote(sys))
		}
	}
	w("\n### Goals (measured, not asserted)\n\n")
	goal := func(what string, v, target float64, unit string, atMost bool) {
		st := "not measured"
		if v > 0 {
			met := v >= target
			if atMost {
				met = v <= target
			}
			prec := 2
			if !met && fmt.Sprintf("%.2f", v) == fmt.Sprintf("%.2f", target) {
				prec = 4 // enough digits to show the miss
			}
			st = fmt.Sprintf("%.*f%s — %s", prec, v, unit, map[bool]string{true: "met", false: "**not met**"}[met])
		}
		w("- %s: %s\n", what, st)
	}
	s.sustainGoals(goal)
	goal("burst produce ≥ 3× Kafka (1 KiB)", ratioF(s.mbps("sluice", MProduce1K), s.mbps("kafka", MProduce1K)), 3, "×", false)
	goal("burst produce ≥ 5× NATS (1 KiB)", ratioF(s.mbps("sluice", MProduce1K), s.mbps("nats", MProduce1K)), 5, "×", false)
	goal("consume from the page cache ≥ 0.85 of sendfile", ratioF(s.mbps("sluice", MConsumePage), s.mbps("sendfile", MConsumePage)), 0.85, "", false)
	goal("consume from memory ≥ 0.7 of tcp", ratioF(s.mbps("sluice", MConsumeMem), s.mbps("tcp", MConsumeMem)), 0.7, "", false)
	s.latencyGoals(w)
	w("\n### Settings\n\n")
	w("Common: topics of %d partitions, one producer and one consumer, batches up to %d KiB, linger %v for the produce runs (%v for the latency runs), no compression, record values of random-and-repeated bytes stamped with their send time. Produce runs send %s; each is acknowledged by the server before the run ends (Flush).\n\n", suitePartitions, suiteBatch>>10, suiteLinger, e2eLinger, s.countsNote())
	w("- **sluice** (`bin/sluice broker -log.fsync never -arena-size 4GiB -arena.prefault true`, runs start once the arena is faulted in): the Go client, producer acknowledged on acceptance (records in the broker's memory arena, written to the segment files from there with O_DIRECT, without fsync), each record kept by the producer until it is on disk, in a buffer of up to %d MiB (the page cache's part in Kafka: it rides out the disk's stalls), the consumer with the client's default settings (a 1 MiB budget per fetch) but a 100 ms long poll. Compared with Kafka acks=1 without fsync and with NATS at its default 2-minute fsync: none of the three fsyncs per write.\n", bufferBytesDefault>>20)
	w("- **Kafka** 4.3.1, single-node KRaft from Maven Central jars, heap 1 GiB (G1), default flush settings (no fsync per write, the page cache); franz-go v1.22.3 with acks=1 (leader), idempotence off, the same batch size and linger, sticky partitioner; consumers assign partitions directly (no group).\n")
	w("- **NATS** JetStream 2.15.3, file store, default `sync_interval` (fsync every 2 minutes; `sync_interval: always` is about 20× slower per DESIGN.md §7 and not run here); one stream with a subject per partition; nats.go v1.55.0 async publish with at most %d unacknowledged, each publish waiting up to 30 s for room (its batching is the connection's write coalescing; batch size and linger do not apply), an ordered pull consumer (batches of 1000, no acks).\n", natsMaxPending)
	w("- **Ceilings**, in the harness process: `tcp` writes %d KiB buffers of records into a loopback socket drained by a goroutine (produce) and reads a socket fed from memory (consume from memory); `sendfile` appends the same buffers to a plain file (produce) and sends that file, page-cached, over a loopback socket with sendfile (consume from the page cache). They run right after sluice's runs when sluice ran (before its sustained runs and the other systems), last otherwise%s%s.\n", suiteBatch>>10,
		map[bool]string{true: "; the tcp ceiling's consume rounds alternate with sluice's consume from memory (below)"}[s.tcpBeside()],
		map[bool]string{true: "; the sendfile ceiling's file is written, and its consume runs, among sluice's runs of consume from the page cache (below)"}[s.pagePaired()])
	w("- **Consume from memory**: right after the 1 KiB produce run, each system's consumer reads its records from the start %d times%s, and the run of median MB/s is kept; the tcp ceiling's consume runs as many times%s.\n", consumeRounds,
		memoryPaths(s.MemoryPaths),
		map[bool]string{true: ", its rounds alternating with sluice's (one after sluice's first, one before its second, and so on: `bench/pagepair.go`)"}[s.tcpBeside()])
	w("- **Consume after a restart, and from the page cache**: each system's server is restarted after its consume from memory and the same records are consumed right away, from wherever it left them: Kafka's and NATS's segments were written through the page cache, sluice's with O_DIRECT past it, so sluice reads them from the disk (that row has no ceiling). Then it is restarted again and every file of its data directory is read once before the records are consumed again (`bench/warm.go`): that run, from the page cache for every system, is the one compared with sendfile. It runs %d times, each after a restart, and so does the sendfile ceiling%s; each keeps its run of median MB/s (`bench/median.go`: single runs of half a second moved by up to 1.4× between neighbours).\n", consumeRounds,
		map[bool]string{true: ", whose rounds alternate with sluice's (one before sluice's first round, one after its second, and so on: `bench/pagepair.go`), so that the ratio compares runs seconds apart, not a minute"}[s.pagePaired()])
	w("- **Sustained runs**: topics of %d partitions with retention of %d MiB per partition; sluice: topic `RetentionBytes` and `SegmentBytes` %d MiB, retention applied every 2 s (`-broker.retention_check 2s`); Kafka: `retention.bytes`, `segment.bytes` %d MiB, `file.delete.delay.ms` 1000, broker `log.retention.check.interval.ms` 5000; NATS: the stream's `MaxBytes` (%d MiB, all partitions), discard old. Each system is restarted on an empty data directory before each sustained run and its data directory deleted after; a run stops early if the disk's free space falls below a reserve left to others (max(8 GiB, 10%% of the disk)).\n",
		suitePartitions, sustainRetention>>20, sustainSegment>>20, sustainSegment>>20, suitePartitions*sustainRetention>>20)
	if len(s.Skipped) > 0 {
		w("\nNot measured in this run:\n\n")
		for _, k := range slices.Sorted(maps.Keys(s.Skipped)) { // a report renders the same twice
			w("- %s: %s\n", k, firstLine(s.Skipped[k]))
		}
	}
	if len(charts) > 0 {
		w("\n### Charts\n\n")
		for _, c := range charts {
			w("![%s](%s)\n\n", strings.TrimSuffix(c[strings.LastIndex(c, "/")+1:], ".png"), c)
		}
	}
	return b.String()
}

func ratioF(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}

func (s *Suite) skipNote(sys string) string {
	if v, ok := s.Skipped[sys]; ok {
		return "(" + firstLine(v) + ")"
	}
	return ""
}

func (s *Suite) countsNote() string {
	sz := sizesOf(s.Quick)
	return fmt.Sprintf("%d records of 1 KiB or %d of 100 B, each run bounded by %v", sz.count1K, sz.count100, sz.cap)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// memoryPaths says where the sluice broker served its consume-from-memory rounds from, by
// its counters, or nothing when they were not read.
func memoryPaths(p *FetchPaths) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" (sluice's broker sent %.2f GB over those rounds from memory, by writev, and %.2f GB from its files, by sendfile: `sluice_fetch_bytes_total`)", p.Copy/1e9, p.Sendfile/1e9)
}
