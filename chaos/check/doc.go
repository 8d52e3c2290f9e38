// Package check is the queue checker of `sluice chaos`, after Jepsen's: from what the
// producers sent and which acknowledgement each record reached, and from what the
// consumers read (partition, offset, record), it finds the anomalies a message log may
// or must not show. It is pure: no goroutines, no I/O, no clocks; the harness in package
// chaos records a History and calls Check.
//
// # Record values
//
// Every record the harness produces carries its own identity in its value, so a read
// needs nothing but the value to be checked (value.go):
//
//	offset size field
//	     0    4 magic      "sck1"
//	     4    8 producer   uint64 little-endian: the writer's id
//	    12    8 sequence   uint64 little-endian: per writer, from 0, never reused
//	    20    4 checksum   CRC32C (Castagnoli) of every other byte of the value
//	    24    n padding    any bytes (so values have the size the workload asks; the
//	                       workload's repeat 8 bytes, so that its batches compress)
//
// # What is counted
//
// Counts marked "forbidden" must be 0 for the verdict to be OK; the others are allowed by
// sluice's contract and counted so a run shows them (RELIABILITY.md):
//
//	lost               forbidden  acknowledged persisted, never read at or below C
//	duplicated         forbidden  one producer+sequence at two offsets, both read at or below C
//	reordered          forbidden  within a partition, a producer's sequence going back
//	inconsistent       forbidden  two reads at or below C of one partition+offset disagree
//	unexpected         forbidden  read but never sent, sent as failed, or a bad checksum
//	lost-accepted      allowed    acknowledged accepted only, never read at or below C
//	damaged            allowed    acknowledged (accepted or persisted), never read, and
//	                              destroyed by a fault the harness injected into the files
//	                              (History.Damaged)
//	rewritten          allowed    read above C, or before an injected fault cut the partition
//	                              there (History.Cut), and that offset later holds another record
//	unacknowledged     allowed    sent, outcome unknown (a timeout, a crash): read or not
//
// "At or below C" is a read whose offset the partition's checkpoint covered in the same
// fetch answer: only such reads are final. A read above C may be rewritten after a crash
// (the broker answers reads up to its high watermark, which may pass C). A read of a
// position that an injected fault later destroyed (History.Cut) is no longer final either:
// after the broker's or the operator's cut, new records take those offsets.
package check
