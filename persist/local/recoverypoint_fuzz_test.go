package local

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeRecoveryPoint reads an arbitrary recovery point file through
// ReadRecoveryPoint, and encodes arbitrary recovery points. When fixCRC is set and the
// input has the file's size, its checksum is set right first, so that the checks behind
// the checksum (magic, version, flags, offset) are reached too. It checks: no panic;
// decodeRecoveryPoint returns a recovery point or a reason, never both; a refused file
// is a *CorruptionError naming the file, with no offset (the open falls back to trusting
// the data); what it accepts has an offset not below -1 and re-encodes
// (appendRecoveryPoint, what writeRecoveryPoint writes) to exactly the file's bytes; and
// every recovery point with an offset not below -1 encodes to a file that decodes to it.
func FuzzDecodeRecoveryPoint(f *testing.F) {
	for _, rp := range []RecoveryPoint{{Offset: -1}, {Offset: 0, Clean: true}, {Offset: 4095}, {Offset: 1<<63 - 1, Clean: true}} {
		f.Add(appendRecoveryPoint(nil, rp), false, rp.Offset, rp.Clean)
	}
	good := appendRecoveryPoint(nil, RecoveryPoint{Offset: 99})
	for _, c := range []struct {
		at   int
		with byte
	}{{0, 'X'}, {4, 2}, {5, 2}, {6, 1}, {15, 0x80}} { // magic, version, flags, reserved, offset below -1
		b := append([]byte(nil), good...)
		b[c.at] = c.with
		f.Add(b, true, int64(c.at), false)
	}
	f.Add([]byte{}, false, int64(-2), false)
	f.Add(good[:recoveryPointSize-1], true, int64(0), true)
	f.Add(append(append([]byte(nil), good...), 0), true, int64(0), true)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool, off int64, clean bool) {
		if fixCRC && len(b) == recoveryPointSize {
			binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], crcTable))
		}
		rp, reason := decodeRecoveryPoint(b)
		if reason != "" && rp != (RecoveryPoint{}) {
			t.Fatalf("%x refused (%s) with a recovery point %+v", b, reason, rp)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, recoveryPointName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		read, err := ReadRecoveryPoint(nil, dir)
		var ce *CorruptionError
		switch {
		case reason != "" && (!errors.As(err, &ce) || ce.File != filepath.Join(dir, recoveryPointName) || ce.Offset != -1 || ce.Reason != reason):
			t.Fatalf("%x refused (%s): ReadRecoveryPoint gives %+v, %v", b, reason, read, err)
		case reason == "" && (err != nil || read != rp):
			t.Fatalf("%x decodes to %+v: ReadRecoveryPoint gives %+v, %v", b, rp, read, err)
		case reason == "" && rp.Offset < -1:
			t.Fatalf("%x accepted with offset %d", b, rp.Offset)
		case reason == "" && string(appendRecoveryPoint(nil, rp)) != string(b):
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, rp, appendRecoveryPoint(nil, rp))
		}
		if off < -1 {
			return
		}
		want := RecoveryPoint{Offset: off, Clean: clean}
		if got, reason := decodeRecoveryPoint(appendRecoveryPoint(nil, want)); reason != "" || got != want {
			t.Fatalf("%+v encodes to a file read as %+v (%s)", want, got, reason)
		}
	})
}
