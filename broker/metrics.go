package broker

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/wire"
)

// Metrics returns a Prometheus collector reading the broker's figures at scrape time:
// network bytes by path (sendfile vs copy), arena figures by owner kind, and each
// partition's checkpoint lag and read hits. Register it on the registry the metrics
// endpoint serves.
func (b *Broker) Metrics() prometheus.Collector { return &collector{b: b} }

type collector struct{ b *Broker }

var (
	descLease = prometheus.NewDesc("sluice_cluster_lease_seconds",
		"Distributed mode: how long the broker's write lease lasts from now (renewed by a ZooKeeper round trip every fifth of the session timeout); at or below 0 it answers produce not_owner.", nil, nil)
	descMoves = prometheus.NewDesc("sluice_cluster_moves_total",
		"Distributed mode: partitions loaded here (load) and given up (unload) since start.", []string{"kind"}, nil)
	descTLS = prometheus.NewDesc("sluice_tls_connections_total",
		"With TLS on: connections by how their start went: ok (handshake done), failed (bad or no certificate, wrong version, timeout), plaintext (a plaintext client, answered tls_required), refused (closed at once: the front's connection limit, a sixth of the file limit, was reached).", []string{"result"}, nil)
	descCertExpiry = prometheus.NewDesc("sluice_tls_certificate_expiry_seconds",
		"With TLS on: when the serving certificate expires, in seconds since the epoch (subtract time() for what is left). A reload (SIGHUP) of a certificate already expired or not yet valid is refused and the serving one stays.", nil, nil)
	descTLSReloads = prometheus.NewDesc("sluice_tls_reloads_total",
		"With TLS on: loads of the certificate, key and client CA files (at start and on SIGHUP), by result: ok, or failed (unreadable, not matching, expired or not yet valid: the serving certificate stays; see the log).", []string{"result"}, nil)
	descAuth = prometheus.NewDesc("sluice_auth_total",
		"With authentication on: exchanges by result: ok (the proof passed), failed (a wrong password or an unknown user: they are not told apart), invalid (a malformed message or an unsupported mechanism).", []string{"result"}, nil)
	descAuthRefused = prometheus.NewDesc("sluice_auth_refused_requests_total",
		"With authentication on: requests refused, by code: auth_required (the connection has not authenticated) or not_authorized (no grant for the operation on the topic).", []string{"code"}, nil)
	descAuthReloads = prometheus.NewDesc("sluice_auth_reloads_total",
		"With authentication on: reloads of the users and ACL files (SIGHUP or a change seen), by result: ok, or failed (the previous users and grants stay; see the log).", []string{"result"}, nil)
	descAuthFailing = prometheus.NewDesc("sluice_auth_reload_failing",
		"With authentication on: 1 while the newest users and ACLs (files or znodes) do not load and an older snapshot serves (see the log), else 0.", nil, nil)
	descAuthUsers = prometheus.NewDesc("sluice_auth_users",
		"With authentication on: users in the snapshot served (0: every connection is refused).", nil, nil)
	descBrokers = prometheus.NewDesc("sluice_cluster_brokers",
		"Distributed mode: live brokers registered in ZooKeeper, as this broker last read them.", nil, nil)
	descAssigned = prometheus.NewDesc("sluice_cluster_partitions",
		"Distributed mode: the cluster's partitions by where they are assigned, as this broker last read them: live_broker, dead_broker (moving: the admin has not placed them again yet), none.", []string{"assigned_to"}, nil)
	descSent = prometheus.NewDesc("sluice_fetch_bytes_total",
		"Response bytes written, by path: sendfile (segment data, never in user space) or copy (writev from memory).", []string{"path"}, nil)
	descConns    = prometheus.NewDesc("sluice_connections", "Open client connections.", nil, nil)
	descRequests = prometheus.NewDesc("sluice_requests_total", "Requests read.", nil, nil)
	descProtoErr = prometheus.NewDesc("sluice_protocol_errors_total", "Frames refused as malformed.", nil, nil)
	descArena    = prometheus.NewDesc("sluice_arena_bytes",
		"Arena memory by kind: size, used, free, write_buffer, block_cache, other, pending (not yet durable), mapped, prefaulted (faulted in at start by arena.prefault).", []string{"kind"}, nil)
	descReclaimed = prometheus.NewDesc("sluice_arena_reclaimed_bytes_total", "Bytes reclaimed from owners.", nil, nil)
	descFull      = prometheus.NewDesc("sluice_arena_full_total", "Chunk allocations refused because the arena was full of data not yet durable (an append may try more than once; sluice_produce_refused_total counts the answers).", nil, nil)
	descLag       = prometheus.NewDesc("sluice_partition_checkpoint_lag",
		"Offsets accepted but not yet durable (next offset - 1 - checkpoint).", []string{"topic", "partition"}, nil)
	descHits = prometheus.NewDesc("sluice_partition_reads_total",
		"Fetches served, by source: memory (write buffer) or log.", []string{"topic", "partition", "source"}, nil)
	descState = prometheus.NewDesc("sluice_partition_state",
		"1 for the partition's state: serving; damaged (corrupt acknowledged data found at load: reads up to it, no writes, run `sluice segment repair`); failed (a write or fsync failed: no writes until restart); offline (could not be opened); not_owner (distributed mode: another broker's, or none's yet); no_space (its disk is full: writes refused until space is freed).",
		[]string{"topic", "partition", "state"}, nil)
	descPanics = prometheus.NewDesc("sluice_internal_errors_total",
		"Panics recovered while serving a request (each answered with an internal error and logged with its stack), by where: loop or shard.", []string{"where"}, nil)
	descReleased = prometheus.NewDesc("sluice_long_polls_released_total",
		"Parked long polls answered early because a later answer on their connection was ready (answers keep request order).", nil, nil)
	descWakes = prometheus.NewDesc("sluice_long_poll_wakes_total",
		"Appends that found long polls parked and woke them, by where the wake ran: on the appending event loop (the partition's shard idle) or on the shard.", []string{"where"}, nil)
	descParked = prometheus.NewDesc("sluice_parked_requests",
		"Requests waiting on a partition, by kind: fetch (long polls) or durable (produces waiting for the checkpoint).", []string{"kind"}, nil)
	descProduced = prometheus.NewDesc("sluice_produce_bytes_total",
		"Batch bytes accepted by produce requests (appended to partitions; resends of duplicates not counted).", nil, nil)
	descCopied = prometheus.NewDesc("sluice_produce_copied_bytes_total",
		"Bytes the produce path copied in user space, each copy counted: the copy into the arena, and netio's copy of request frames a socket read cut in two. Divided by sluice_produce_bytes_total: the copies per produced byte.", nil, nil)
	descDirect = prometheus.NewDesc("sluice_partition_direct_io",
		"1 when the partition's segment files are written with O_DIRECT from the arena; 0 when the filesystem refused O_DIRECT (tmpfs, some others) and they are written through the page cache (logged once per partition).",
		[]string{"topic", "partition"}, nil)
	descReused = prometheus.NewDesc("sluice_partition_segments_reused_total",
		"Segments the partition started in a file its retention had deleted, zeroed in place, instead of creating one (log.segment_reuse): neither allocates nor frees disk space, which on a filesystem mounted with discard spares the device a TRIM per segment. Since the partition loaded.",
		[]string{"topic", "partition"}, nil)
	descLogBytes = prometheus.NewDesc("sluice_partition_log_bytes",
		"Bytes of record batches in the partition's segment files on this host (written data; the active segment's file is preallocated to log.segment_bytes, and files kept for reuse are not counted). Segments found sealed at start count from the partition's first retention check (broker.retention_check), with or without retention settings.",
		[]string{"topic", "partition"}, nil)
	descSkipped = prometheus.NewDesc("sluice_data_dir_skipped", "Directories in the data directory that are not readable topics (skipped at start; see the log).", nil, nil)
	descInbound = prometheus.NewDesc("sluice_net_inbound_bytes",
		"Memory for requests read and not yet handled, by kind: buffered (charged to net.max_inbound_total: partial frames, and requests waiting while their connection takes no more) or idle (buffers kept for reuse).", []string{"kind"}, nil)
	descOutbound = prometheus.NewDesc("sluice_net_outbound_bytes",
		"Memory held for answers not yet written, by kind: queued (answers ready, bytes in memory such as arena chunks) or reserved (what fetches taken may answer); bounded by net.max_outbound_total.", []string{"kind"}, nil)
	descRefused = prometheus.NewDesc("sluice_net_refused_connections_total",
		"Connections answered with busy and closed because the inbound budget (reason budget) or their own cap, net.max_inbound (reason connection), would not take more of their requests.", []string{"reason"}, nil)
	descTimedOut = prometheus.NewDesc("sluice_net_frames_timed_out_total",
		"Connections closed because a partial request frame received nothing for net.frame_timeout.", nil, nil)
	descSendTimedOut = prometheus.NewDesc("sluice_net_sends_timed_out_total",
		"Connections closed because their socket took no byte of their answers for net.send_timeout: clients that stopped reading (their answers, and the arena chunks and deleted segments' files those held, were released).", nil, nil)
	descExpired = prometheus.NewDesc("sluice_auth_timed_out_connections_total",
		"With authentication on: connections closed because they did not authenticate within auth.timeout (from their start, or from losing their user).", nil, nil)
	descPaused = prometheus.NewDesc("sluice_net_paused_total",
		"Times a connection stopped taking requests, by reason: inflight (max requests in flight) or outbound (its unread answers hold its share of net.max_outbound_total).", []string{"reason"}, nil)
	descHDFSLag = prometheus.NewDesc("sluice_partition_hdfs_lag_offsets",
		"Distributed mode: offsets accepted and not yet acknowledged by HDFS (the checkpoint waits for them).", []string{"topic", "partition"}, nil)
	descHDFSLagBytes = prometheus.NewDesc("sluice_partition_hdfs_lag_bytes",
		"Distributed mode: batch bytes accepted since the partition loaded and not yet acknowledged by HDFS (a backlog left by the previous run is not counted).", []string{"topic", "partition"}, nil)
	descHDFSLagSec = prometheus.NewDesc("sluice_partition_hdfs_lag_seconds",
		"Distributed mode: how long the partition has had data waiting to ship to HDFS (0 when HDFS has everything).", []string{"topic", "partition"}, nil)
	descHDFSFailing = prometheus.NewDesc("sluice_partition_hdfs_failing",
		"Distributed mode: 1 when the partition's last commit round to HDFS failed (retried with backoff).", []string{"topic", "partition"}, nil)
	descHDFSRounds = prometheus.NewDesc("sluice_hdfs_commit_rounds_total",
		"Distributed mode: commit rounds to HDFS, by result: ok or failed.", []string{"result"}, nil)
	descHDFSSwitches = prometheus.NewDesc("sluice_hdfs_pipeline_switches_total",
		"Distributed mode: commit rounds written into a new HDFS file because an append to the current one would not have gone through exactly its replicas (fewer live DataNodes than the replication, or a DataNode's report late): appending without a replica could lose acknowledged data (persist/hdfs/pipeline.go). Steady growth: HDFS is short of DataNodes, and every round starts a file.", nil, nil)
	descHDFSBytes = prometheus.NewDesc("sluice_hdfs_shipped_bytes_total",
		"Distributed mode: batch bytes HDFS acknowledged.", nil, nil)
	descHDFSRead = prometheus.NewDesc("sluice_hdfs_fetched_bytes_total",
		"Distributed mode: batch bytes fetches read from HDFS (offsets no longer held locally), through the arena's block cache.", nil, nil)
	descDirectRead = prometheus.NewDesc("sluice_net_direct_read_bytes_total",
		"Request bytes the broker read from sockets itself, straight into connections' buffers (the rest of a frame the event loop's first small read cut, and read-ahead between frames): never copied in user space before the handler.", nil, nil)
	descAnswers = prometheus.NewDesc("sluice_net_answers_written_total",
		"Answers written to sockets, by writer: answerer (the goroutine that made the answer, or one behind it, wrote it at once) or loop (the connection's event loop, woken for it: answers with a file region or over 256 KiB, or left by a writer that had the connection).", []string{"writer"}, nil)
	descPersister = prometheus.NewDesc("sluice_persister_events_total",
		"Shard persisters' events: parked (none of the shard's partitions had data waiting, so it stopped passing over them every log.fsync_interval) and resumed (an append found it parked and started its passes again).", []string{"event"}, nil)
	descShardTasks = prometheus.NewDesc("sluice_shard_tasks_total",
		"Tasks each shard ran, by where: goroutine (queued to the shard's goroutine) or inline (run at once by the event loop that had the work, the shard being idle: no goroutine woken).", []string{"shard", "run"}, nil)
	descShardWakeups = prometheus.NewDesc("sluice_shard_wakeups_total",
		"Times each shard's goroutine woke from parked, for a task or a timer: each may cost a thread wake-up, tens of microseconds of processor time on a virtual machine (BENCHMARKS.md's machine line gives the host's).", []string{"shard"}, nil)
	descShardBusy = prometheus.NewDesc("sluice_shard_refused_tasks_total",
		"Tasks refused because the shard's queue was full (answered busy, or left to their deadline).", []string{"shard"}, nil)
	descProduceRefused = prometheus.NewDesc("sluice_produce_refused_total",
		"Produce requests answered with an error, by its code: busy is the throttle (memory full of data not yet durable, arena.partition_max reached, the shard's queue full or the partition switching layouts).", []string{"code"}, nil)
	descClamped = prometheus.NewDesc("sluice_net_fetches_clamped_total",
		"Fetches whose max bytes was lowered to the room their connection had in the outbound budget.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSent, descConns, descRequests, descProtoErr, descArena, descReclaimed,
		descFull, descLag, descHits, descState, descDirect, descReused, descLogBytes, descPanics, descReleased, descWakes, descSkipped, descParked, descProduced, descCopied,
		descInbound, descOutbound, descRefused, descTimedOut, descSendTimedOut, descExpired, descPaused, descClamped, descDirectRead, descAnswers,
		descPersister, descShardTasks, descShardWakeups, descShardBusy, descProduceRefused, descHDFSLag, descHDFSLagBytes, descHDFSLagSec, descHDFSFailing, descHDFSRounds, descHDFSSwitches, descHDFSBytes, descHDFSRead,
		descAuth, descAuthRefused, descAuthReloads, descAuthFailing, descAuthUsers, descTLS, descCertExpiry, descTLSReloads} {
		ch <- d
	}
	c.b.stages.describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ns, as := c.b.Stats()
	c.b.stages.collect(ch)
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descSent, float64(ns.BytesSendfile), "sendfile")
	counter(descSent, float64(ns.BytesCopied), "copy")
	gauge(descConns, float64(ns.Connections))
	counter(descRequests, float64(ns.Requests))
	counter(descProtoErr, float64(ns.ProtocolErrs))
	for kind, v := range map[string]int64{"size": as.Size, "used": as.UsedBytes, "free": as.FreeBytes,
		"write_buffer": as.WriteBufferBytes, "block_cache": as.BlockCacheBytes, "other": as.OtherBytes,
		"pending": as.PendingBytes, "mapped": as.MappedBytes, "prefaulted": as.PrefaultedBytes} {
		gauge(descArena, float64(v), kind)
	}
	counter(descReclaimed, float64(as.ReclaimedBytes))
	counter(descFull, float64(as.FullErrors))
	for code := range c.b.refused {
		if n := c.b.refused[code].Load(); n > 0 {
			counter(descProduceRefused, float64(n), wire.Code(code).String())
		}
	}
	counter(descPanics, float64(ns.Panics), "loop")
	counter(descPanics, float64(c.b.panics.Load()), "shard")
	counter(descReleased, float64(ns.Released))
	counter(descWakes, float64(c.b.wakesLoop.Load()), "loop")
	counter(descWakes, float64(c.b.wakesShard.Load()), "shard")
	gauge(descSkipped, float64(c.b.skippedDirs.Load()))
	counter(descProduced, float64(c.b.produced.Load()))
	counter(descCopied, float64(c.b.copied.Load()+ns.BytesHeld)) // the arena copy, and netio's of cut frames
	gauge(descParked, float64(c.b.parkedFetch.Load()), "fetch")
	gauge(descParked, float64(c.b.parkedAck.Load()), "durable")
	gauge(descInbound, float64(ns.InboundBuffered), "buffered")
	gauge(descInbound, float64(ns.InboundIdle), "idle")
	gauge(descOutbound, float64(ns.OutboundQueued), "queued")
	gauge(descOutbound, float64(ns.OutboundReserved), "reserved")
	counter(descRefused, float64(ns.RefusedBudget), "budget")
	counter(descRefused, float64(ns.RefusedConnLimit), "connection")
	counter(descTimedOut, float64(ns.FramesTimedOut))
	counter(descSendTimedOut, float64(ns.SendsTimedOut))
	counter(descExpired, float64(ns.Expired))
	counter(descDirectRead, float64(ns.BytesReceived))
	counter(descAnswers, float64(ns.DirectWrites), "answerer")
	counter(descAnswers, float64(ns.LoopWrites), "loop")
	if b := c.b.shipper; b != nil {
		commits, failures, bytes, parts := b.Stats()
		counter(descHDFSRounds, float64(commits), "ok")
		counter(descHDFSRounds, float64(failures), "failed")
		counter(descHDFSBytes, float64(bytes))
		counter(descHDFSSwitches, float64(b.PipelineSwitches()))
		counter(descHDFSRead, float64(c.b.remoteBytes.Load()))
		for _, ps := range parts {
			topic, id := ps.Topic, strconv.Itoa(ps.Partition)
			gauge(descHDFSLag, float64(ps.LagOffsets), topic, id)
			if pt, err := c.b.lookup([]byte(ps.Topic), uint32(ps.Partition)); err == nil {
				appended := pt.appended.Load()
				gauge(descHDFSLagBytes, float64(appended-min(appended, ps.Shipped)), topic, id)
			}
			gauge(descHDFSLagSec, ps.Lag.Seconds(), topic, id)
			failing := 0.0
			if ps.Failing {
				failing = 1
			}
			gauge(descHDFSFailing, failing, topic, id)
		}
	}
	counter(descPaused, float64(ns.PausedInflight), "inflight")
	counter(descPaused, float64(ns.PausedOutbound), "outbound")
	counter(descClamped, float64(ns.FetchesClamped))
	parks, resumes := c.b.persisterEvents()
	counter(descPersister, float64(parks), "parked")
	counter(descPersister, float64(resumes), "resumed")
	for _, st := range c.b.sched.Stats() {
		shard := strconv.Itoa(st.Shard)
		counter(descShardTasks, float64(st.TasksRun-st.Inline), shard, "goroutine")
		counter(descShardTasks, float64(st.Inline), shard, "inline")
		counter(descShardWakeups, float64(st.Wakeups), shard)
		counter(descShardBusy, float64(st.Busy), shard)
	}
	if f := c.b.front; f != nil {
		st := f.Stats()
		counter(descTLS, float64(st.Handshakes), "ok")
		counter(descTLS, float64(st.Failed), "failed")
		counter(descTLS, float64(st.Plaintext), "plaintext")
		counter(descTLS, float64(st.Refused), "refused")
		counter(descTLSReloads, float64(st.ReloadsOK), "ok")
		counter(descTLSReloads, float64(st.ReloadsFailed), "failed")
		gauge(descCertExpiry, float64(st.NotAfter.Unix()))
	}
	if a := c.b.auth; a != nil {
		counter(descAuth, float64(a.ok.Load()), "ok")
		counter(descAuth, float64(a.failed.Load()), "failed")
		counter(descAuth, float64(a.invalid.Load()), "invalid")
		counter(descAuthRefused, float64(a.required.Load()), "auth_required")
		counter(descAuthRefused, float64(a.denied.Load()), "not_authorized")
		counter(descAuthReloads, float64(a.reloadsOK.Load()), "ok")
		counter(descAuthReloads, float64(a.reloadsFailed.Load()), "failed")
		failing := 0.0
		if a.failing.Load() {
			failing = 1
		}
		gauge(descAuthFailing, failing)
		gauge(descAuthUsers, float64(len(a.snap.Load().Users.Names())))
	}
	if cl := c.b.cl; cl != nil {
		gauge(descLease, time.Duration(cl.lease.Load()-c.b.now()).Seconds())
		counter(descMoves, float64(cl.loads.Load()), "load")
		counter(descMoves, float64(cl.unloads.Load()), "unload")
		brokers, live, dead, none := cl.figures()
		gauge(descBrokers, float64(brokers))
		gauge(descAssigned, float64(live), "live_broker")
		gauge(descAssigned, float64(dead), "dead_broker")
		gauge(descAssigned, float64(none), "none")
	}
	c.b.mu.RLock()
	defer c.b.mu.RUnlock()
	for name, t := range c.b.mu.topics {
		for _, pt := range t.parts {
			id := strconv.Itoa(pt.id)
			gauge(descState, 1, name, id, pt.state())
			if pt.p == nil {
				continue
			}
			w := pt.p.Window()
			if direct, known := pt.p.DirectIO(); known {
				v := 0.0
				if direct {
					v = 1
				}
				gauge(descDirect, v, name, id)
			}
			if n, ok := pt.p.DiskBytes(); ok {
				gauge(descLogBytes, float64(n), name, id)
			}
			if n, ok := pt.p.ReusedFiles(); ok {
				counter(descReused, float64(n), name, id)
			}
			gauge(descLag, float64(w.Next-1-w.Checkpoint), name, id)
			hits, misses := pt.p.Counters()
			counter(descHits, float64(hits), name, id, "memory")
			counter(descHits, float64(misses), name, id, "log")
		}
	}
}
