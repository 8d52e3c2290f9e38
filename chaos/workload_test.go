package chaos

import (
	"testing"

	"sluice/batch"
	"sluice/chaos/check"
	"sluice/codec"
)

// TestWorkloadBatchesCompress: the workload's values compress, so that a batch of a
// single record (what a synchronous writer sends) is stored with the codec its producer
// asked for, not uncompressed because compressing did not make it smaller: else the
// runs' codec counts would say batches were compressed that were not (a review found
// exactly that with random padding).
func TestWorkloadBatchesCompress(t *testing.T) {
	var comp codec.Compressor
	for c := batch.CodecZstd; c <= batch.CodecLZ4; c++ {
		for _, n := range []int{1, 2, 30} {
			var b batch.Builder
			b.Reset(nil, 7, 0)
			for i := range n {
				b.Add(uint16(i), 1_700_000_000_000, nil, check.AppendValue(nil, check.ID{Producer: 3<<32 | 1, Seq: uint64(i)}, 100))
			}
			h, err := batch.ParseHeader(comp.Finish(&b, c))
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec != c {
				t.Errorf("a batch of %d workload records asked for %v is stored as %v", n, c, h.Codec)
			}
		}
	}
}
