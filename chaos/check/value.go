package check

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Value layout (doc.go).
const (
	magic     = "sck1"
	headerLen = 24
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ID names one record sent: its writer and the writer's sequence number.
type ID struct {
	Producer uint64
	Seq      uint64
}

// String returns "producer/sequence".
func (id ID) String() string { return fmt.Sprintf("%d/%d", id.Producer, id.Seq) }

// AppendValue appends a record value for id to dst, padded to size bytes (at least the
// 24 of the header), and returns it. The padding is 8 bytes derived from id, repeated, so
// a value is reproducible and compresses as a log line does: a batch of a single record
// is then stored compressed too, where random padding made every codec give up on it.
func AppendValue(dst []byte, id ID, size int) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint64(dst, id.Producer)
	dst = binary.LittleEndian.AppendUint64(dst, id.Seq)
	dst = append(dst, 0, 0, 0, 0)
	x := id.Producer*0x9e3779b97f4a7c15 ^ id.Seq
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	for i := headerLen; i < size; i++ {
		dst = append(dst, byte(x>>(8*(i%8))))
	}
	v := dst[start:]
	binary.LittleEndian.PutUint32(v[20:], checksum(v))
	return dst
}

// checksum is the CRC32C of v without its checksum field.
func checksum(v []byte) uint32 {
	c := crc32.Update(0, castagnoli, v[:20])
	return crc32.Update(c, castagnoli, v[headerLen:])
}

// DecodeValue returns the identity a value carries. A value too short, with another
// magic or whose checksum does not match is an error wrapping ErrBadValue.
func DecodeValue(v []byte) (ID, error) {
	if len(v) < headerLen {
		return ID{}, fmt.Errorf("cannot decode value of %d bytes: %w", len(v), ErrBadValue)
	}
	if string(v[:4]) != magic {
		return ID{}, fmt.Errorf("cannot decode value with magic %q: %w", v[:4], ErrBadValue)
	}
	id := ID{Producer: binary.LittleEndian.Uint64(v[4:]), Seq: binary.LittleEndian.Uint64(v[12:])}
	if got, want := checksum(v), binary.LittleEndian.Uint32(v[20:]); got != want {
		return id, fmt.Errorf("cannot decode value %v: checksum %08x, want %08x: %w", id, got, want, ErrBadValue)
	}
	return id, nil
}
