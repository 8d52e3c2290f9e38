package bench

import (
	"fmt"
	"strings"
)

// The generated section's parts for the sustained runs, the disk ceilings and the copy
// count (report.go renders the rest).

// sustained returns a sustained run's figure for ratios and goals: the steady rate (the
// second half of the run) when the run has a series, else the whole run's; 0 if missing
// or failed.
func (s *Suite) sustained(system, m string) float64 {
	r := s.Results[system][m]
	if r == nil || r.Errors > 0 {
		return 0
	}
	if v := r.Steady(); v > 0 {
		return v
	}
	return r.MBPerSec
}

// disk returns the disk ceiling of a mode, nil if not measured.
func (s *Suite) disk(mode string) *DiskResult {
	for _, d := range s.Disk {
		if d.Mode == mode && !d.Refused && d.MBPerSec > 0 {
			return d
		}
	}
	return nil
}

func (s *Suite) diskMBps(mode string) float64 {
	if d := s.disk(mode); d != nil {
		return d.MBPerSec
	}
	return 0
}

var sustainTitles = []struct{ m, title string }{
	{MSustain1K, "1 KiB records"},
	{MSustain100, "100 B records"},
}

// sustainedMarkdown renders the sustained runs, the disk ceilings and the copy count.
func (s *Suite) sustainedMarkdown(w func(string, ...any)) {
	sz := sizesOf(s.Quick)
	w("### Sustained produce (MB/s of record values)\n\n")
	w("Each system started on an empty data directory, producers as fast as they can for %v and %.0f GB, whichever is later (at most %v); retention keeps %d MiB per partition. **steady** is the mean of the second half of the run (once the page cache's dirty limit and the producer's buffer are full), used for the ratios and goals; **run** is the whole run, from the first send to the last acknowledgment. The ceilings are the disk ceilings below.\n\n",
		sz.sustainMin, float64(sz.sustainBytes)/1e9, sz.sustainMax, sustainRetention>>20)
	w("| measurement | sluice | Kafka | NATS | O_DIRECT ceiling | buffered ceiling | sluice/Kafka | sluice/NATS | sluice/O_DIRECT |\n|---|---|---|---|---|---|---|---|---|\n")
	direct, buffered := s.diskMBps(DiskDirect), s.diskMBps(DiskBuffered)
	for _, mt := range sustainTitles {
		sl, k, n := s.sustained("sluice", mt.m), s.sustained("kafka", mt.m), s.sustained("nats", mt.m)
		w("| %s, steady | %s | %s | %s | %s | %s | %s | %s | %s |\n", mt.title, cell(sl), cell(k), cell(n), cell(direct), cell(buffered),
			ratio(sl, k), ratio(sl, n), ratio(sl, direct))
		w("| %s, run | %s | %s | %s | | | %s | %s | %s |\n", mt.title, cell(s.mbps("sluice", mt.m)), cell(s.mbps("kafka", mt.m)), cell(s.mbps("nats", mt.m)),
			ratio(s.mbps("sluice", mt.m), s.mbps("kafka", mt.m)), ratio(s.mbps("sluice", mt.m), s.mbps("nats", mt.m)), ratio(s.mbps("sluice", mt.m), direct))
	}
	w("\nThe runs (MB/s of each second: docs/bench/results.json, `series_mb_per_sec`):\n\n| system | record size | seconds | GB sent | records/s | run MB/s | steady MB/s | slowest second | peak RSS | errors | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sys := range []string{"sluice", "kafka", "nats"} {
		for _, mt := range sustainTitles {
			r := s.Results[sys][mt.m]
			if r == nil {
				w("| %s | %s | — | — | — | — | — | — | — | — | %s |\n", sys, mt.title, s.sustainSkipNote(sys))
				continue
			}
			w("| %s | %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f MiB | %d | %s |\n", sys, mt.title, r.Seconds, float64(r.Bytes)/1e9,
				r.RecordsPerSec, r.MBPerSec, r.Steady(), slowest(r.Series), float64(r.BrokerRSS)/(1<<20), r.Errors, firstLine(strings.TrimSpace(r.Note+" "+r.FirstError)))
		}
	}
	s.diskMarkdown(w)
	w("\n### Copies per produced byte (sluice)\n\n")
	if c := s.Copies; c != nil && c.Produced > 0 {
		w("The broker's counters `sluice_produce_bytes_total` and `sluice_produce_copied_bytes_total` (/metrics), read before and after the sustained 1 KiB run: %.2f GB produced, %.2f GB copied in user space: **%.4f copies per produced byte** (goal ≤ 1).\n",
			c.Produced/1e9, c.Copied/1e9, c.Ratio())
	} else {
		w("Not measured in this run %s.\n", s.sustainSkipNote("sluice"))
	}
}

// diskMarkdown renders the disk ceilings.
func (s *Suite) diskMarkdown(w func(string, ...any)) {
	w("\n### Disk ceilings (the data directory's filesystem)\n\n")
	if len(s.Disk) == 0 {
		w("Not measured in this run %s.\n", s.skipNote("disk ceilings"))
		return
	}
	w("In the harness process, before any server ran: 1 MiB blocks written sequentially into one file preallocated with `fallocate`, from a page-aligned buffer (`mmap`), then the file deleted. Total: %s. **buffered**: `write(2)` through the page cache, no fdatasync until the end (as every system runs here: fsync off); **direct**: `O_DIRECT`, fdatasync every 64 MiB (as the memory-first write path's persister). MB/s include the final fdatasync.\n\n", s.DiskNote)
	w("| mode | filesystem | written | seconds | MB/s | MB/s before the final fdatasync | fdatasync every | note |\n|---|---|---|---|---|---|---|---|\n")
	for _, d := range s.Disk {
		if d.Refused {
			w("| %s | %s | — | — | — | — | — | %s |\n", d.Mode, d.FS, d.Note)
			continue
		}
		every := "end only"
		if d.SyncEvery > 0 {
			every = fmt.Sprintf("%d MiB", d.SyncEvery>>20)
		}
		w("| %s | %s | %.1f GiB | %.1f | %.0f | %.0f | %s | %s |\n", d.Mode, d.FS, float64(d.Bytes)/(1<<30), d.Seconds, d.MBPerSec, d.WriteMBPerSec, every, d.Note)
	}
}

// sustainGoals writes the goals of the memory-first write path.
func (s *Suite) sustainGoals(goal func(what string, v, target float64, unit string, atMost bool)) {
	sl := s.sustained("sluice", MSustain1K)
	goal("sustained produce ≥ 0.5 of the O_DIRECT ceiling (1 KiB, steady)", ratioF(sl, s.diskMBps(DiskDirect)), 0.5, "", false)
	goal("sustained produce ≥ 3× Kafka (1 KiB, steady)", ratioF(sl, s.sustained("kafka", MSustain1K)), 3, "×", false)
	goal("copies per produced byte ≤ 1 (sustained 1 KiB run)", s.Copies.Ratio(), 1, "", true)
}

func (s *Suite) sustainSkipNote(sys string) string {
	if v := s.skipNote(sys + " sustained"); v != "" {
		return v
	}
	return s.skipNote(sys)
}

// slowest returns the lowest figure of a series, 0 if empty.
func slowest(series []float64) float64 {
	if len(series) == 0 {
		return 0
	}
	m := series[0]
	for _, v := range series[1:] {
		m = min(m, v)
	}
	return m
}

// loadNote describes the load average around the run.
func (s *Suite) loadNote() string { return loadNote(s.LoadStart, s.LoadEnd) }

// loadNote describes the load average at the start and at the end of a run.
func loadNote(start, end string) string {
	var parts []string
	if start != "" {
		parts = append(parts, "load average "+start+" at the start")
	}
	if end != "" {
		parts = append(parts, end+" at the end")
	}
	return strings.Join(parts, ", ")
}
