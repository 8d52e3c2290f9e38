package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"sluice/persist/vfs"
)

// The recovery point is the durable record of a partition's checkpoint, in a small file
// of the partition directory (docs/format.md §2 draws it):
//
//	0   4  magic        "SLRP"
//	4   1  version      1
//	5   1  flags        bit 0: written by Close (a clean shutdown); bits 1-7 zero
//	6   2  reserved     zero
//	8   8  offset       int64 R: every batch whose last offset is at most R was on
//	                    stable storage when the file was written (Start-1: none)
//	16  4  crc          CRC32C of bytes [0, 16)
//
// It is written whole through a temporary file, an fsync, a rename and an fsync of the
// directory, so a crash leaves the old file or the new one. Recovery truncates only
// above R; an invalid batch at or below R is damage (see Open).
const (
	recoveryPointName = "recovery-point"
	recoveryPointSize = 20
	recoveryPointV1   = 1
	flagClean         = 1 << 0
)

var recoveryPointMagic = [4]byte{'S', 'L', 'R', 'P'}

// RecoveryPoint is a partition's durable record of its checkpoint.
type RecoveryPoint struct {
	// Offset is the last offset covered: every batch whose last offset is at most Offset
	// was on stable storage when the record was written. Start-1 covers nothing.
	Offset int64
	// Clean is set when the log's Close wrote the record: nothing was appended after it,
	// unless the log was opened again since.
	Clean bool
}

// ErrNoRecoveryPoint is returned (wrapped) by ReadRecoveryPoint for a partition
// directory without one: written by a version before recovery points, or never synced.
var ErrNoRecoveryPoint = errors.New("no recovery point")

// ReadRecoveryPoint reads the recovery point of the partition directory dir. A missing
// file gives an error wrapping ErrNoRecoveryPoint; a file that fails its checks a
// *CorruptionError; either way Open falls back to trusting the data as it finds it.
func ReadRecoveryPoint(fs vfs.FS, dir string) (RecoveryPoint, error) {
	if fs == nil {
		fs = vfs.Default()
	}
	path := dirJoin(dir, recoveryPointName)
	b, err := readAll(fs, path)
	if err != nil {
		if vfs.IsNotExist(err) {
			return RecoveryPoint{}, fmt.Errorf("%w in %s", ErrNoRecoveryPoint, dir)
		}
		return RecoveryPoint{}, err
	}
	rp, reason := decodeRecoveryPoint(b)
	if reason != "" {
		return RecoveryPoint{}, &CorruptionError{File: path, Pos: 0, Offset: -1, Reason: reason}
	}
	return rp, nil
}

// appendRecoveryPoint appends the file form of rp to dst.
func appendRecoveryPoint(dst []byte, rp RecoveryPoint) []byte {
	start := len(dst)
	dst = append(dst, recoveryPointMagic[:]...)
	var flags byte
	if rp.Clean {
		flags |= flagClean
	}
	dst = append(dst, recoveryPointV1, flags, 0, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(rp.Offset))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// decodeRecoveryPoint parses the file form; on any problem it returns why.
func decodeRecoveryPoint(b []byte) (RecoveryPoint, string) {
	switch {
	case len(b) != recoveryPointSize:
		return RecoveryPoint{}, fmt.Sprintf("recovery point is %d bytes, want %d", len(b), recoveryPointSize)
	case binary.LittleEndian.Uint32(b[16:]) != crc32.Checksum(b[:16], crcTable):
		return RecoveryPoint{}, "recovery point checksum does not match"
	case [4]byte(b[:4]) != recoveryPointMagic:
		return RecoveryPoint{}, fmt.Sprintf("recovery point magic %q, want %q", b[:4], recoveryPointMagic[:])
	case b[4] != recoveryPointV1:
		return RecoveryPoint{}, fmt.Sprintf("recovery point version %d, want %d", b[4], recoveryPointV1)
	case b[5]&^flagClean != 0 || b[6] != 0 || b[7] != 0:
		return RecoveryPoint{}, "recovery point has unknown flags or reserved bits set"
	}
	rp := RecoveryPoint{Offset: int64(binary.LittleEndian.Uint64(b[8:])), Clean: b[5]&flagClean != 0}
	if rp.Offset < -1 {
		return RecoveryPoint{}, fmt.Sprintf("recovery point offset %d is below -1", rp.Offset)
	}
	return rp, ""
}

// writeRecoveryPoint replaces dir's recovery point with rp: temporary file, fsync,
// rename, fsync of the directory, whatever the log's fsync policy (a record that a crash
// could roll back would make recovery cut data it had promised to keep, or report
// damage that is not there).
func writeRecoveryPoint(fs vfs.FS, dir string, rp RecoveryPoint) error {
	var buf [recoveryPointSize]byte
	if err := vfs.WriteFile(fs, dir, dirJoin(dir, recoveryPointName), appendRecoveryPoint(buf[:0], rp), true); err != nil {
		return fmt.Errorf("cannot write the recovery point of %s: %w", dir, err)
	}
	return nil
}
