// Package hdfs ships partitions' batches to HDFS and reads them back: in distributed mode
// HDFS is a partition's replica (Swift's model: no broker-to-broker replication), so a
// partition can be reloaded on another broker and read from there.
//
// Layout (docs/format.md §4 is the reference). A partition's files are in
// ROOT/TOPIC/PARTITION/, one data file per run of batches, named
//
//	<base offset, 20 digits>.<epoch, 20 digits>.log
//
// so that a listing sorts them by base offset and, at the same base, by epoch. A data
// file holds whole batches back to back, in the batch format (docs/format.md §1, a CRC per
// batch), from its base offset on; nothing else. A file that reached Options.RollBytes is
// sealed: its index, <name>.index, is written next to it (the offset and position of a
// batch every IndexInterval bytes, the file's data size and next offset, a CRC), and the
// next commit starts a new file. Rolling by size keeps files large (128 MiB by default,
// one HDFS block) however often a partition commits: a quiet partition appends to the
// same file for as long as it takes to fill, so there is no small-files problem to merge
// away, except after failures (below), which start a new file each.
//
// Commits. colinmarc/hdfs's Flush is not hflush: only Close makes written data visible and
// acknowledged. So a commit round of a partition is Append (Create for a new file), the
// writes, Close; only when Close returned is the round acknowledged (Writer.Next moves).
// Any error, including a timeout, abandons the file: a failed writer is never reused, the
// connection that held its lease is closed, and the next round starts a new file at the
// first offset not acknowledged. The abandoned file may hold some of the round's bytes
// (after lease recovery), so the same offsets can be in two files. An append goes
// through only when its pipeline reaches exactly the file's replicas; otherwise the
// round goes into a new file (pipeline.go says why: colinmarc/hdfs appends without a new
// generation stamp, and a replica an acknowledged append left out could later have
// the file cut back to it).
//
// What a reader trusts (view.go). Files are taken in order of base offset, then epoch: a
// file ends where the next trusted file begins, so bytes shipped twice (the abandoned
// file's tail, rewritten in the next file) are visible once. An epoch is the partition's
// session on one broker; a file of an older epoch than a file already taken is fenced:
// it starts at or after the offset where a newer epoch started, so a writer that lost the
// partition but goes on writing is never read past that point. Within the last file the
// data ends at the last whole batch whose CRC matches (a torn tail from a writer that
// died); anywhere else a batch that is not whole or fails its CRC is corruption, reported
// as such and never served.
//
// Timeouts. colinmarc/hdfs calls to the NameNode take no deadline (a call to a paused
// NameNode blocks until it resumes), so every call goes through Conn, which runs it on a
// goroutine of its own and stops waiting after Options.Timeout; the connection is then
// closed (so the stuck call ends with an error as soon as the network lets it) and the
// next call dials again. Nothing here runs on an event loop or a shard: callers are the
// shipper's and the reader's own goroutines.
package hdfs
