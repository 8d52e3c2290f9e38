package hdfs

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// writeBlockRequest builds a data transfer request as colinmarc/hdfs sends it: the
// version, the opcode and an OpWriteBlockProto with a header, targets and a stage.
func writeBlockRequest(op byte, targets int, stage int64) []byte {
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType) // header
	msg = protowire.AppendBytes(msg, []byte{0x0a, 0x02, 0x08, 0x01})
	for range targets {
		msg = protowire.AppendTag(msg, writeBlockTargets, protowire.BytesType)
		msg = protowire.AppendBytes(msg, []byte{0x0a, 0x00})
	}
	if stage >= 0 {
		msg = protowire.AppendTag(msg, writeBlockStage, protowire.VarintType)
		msg = protowire.AppendVarint(msg, uint64(stage))
	}
	msg = protowire.AppendTag(msg, 5, protowire.VarintType) // pipelineSize
	msg = protowire.AppendVarint(msg, uint64(targets))
	b := []byte{0, dataTransferVersion, op}
	return protowire.AppendBytes(b, msg)
}

func TestParseWriteBlock(t *testing.T) {
	f := func(name string, b []byte, size int, appending, ok bool) {
		t.Helper()
		gs, ga, gok := parseWriteBlock(b)
		if gs != size || ga != appending || gok != ok {
			t.Errorf("%s: got size %d appending %v ok %v, want %d %v %v", name, gs, ga, gok, size, appending, ok)
		}
	}
	f("append, 3 DataNodes", writeBlockRequest(opWriteBlock, 2, stagePipelineAppend), 3, true, true)
	f("append, 1 DataNode", writeBlockRequest(opWriteBlock, 0, stagePipelineAppend), 1, true, true)
	f("append recovery", writeBlockRequest(opWriteBlock, 1, stageAppendRecovery), 2, true, true)
	f("create", writeBlockRequest(opWriteBlock, 2, 6), 3, false, true)
	f("no stage", writeBlockRequest(opWriteBlock, 2, -1), 0, false, false)
	f("a read", writeBlockRequest(0x51, 2, stagePipelineAppend), 0, false, false)
	whole := writeBlockRequest(opWriteBlock, 2, stagePipelineAppend)
	f("cut", whole[:len(whole)-3], 0, false, false)
	f("empty", nil, 0, false, false)
	f("other version", append([]byte{0, 27}, whole[2:]...), 0, false, false)
}

// FuzzParseWriteBlock: any bytes are parsed without a panic, and a request the parser
// accepts has a pipeline of at least one DataNode.
func FuzzParseWriteBlock(f *testing.F) {
	f.Add(writeBlockRequest(opWriteBlock, 2, stagePipelineAppend))
	f.Add(writeBlockRequest(opWriteBlock, 0, 6))
	f.Add([]byte{0, dataTransferVersion, opWriteBlock, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		size, _, ok := parseWriteBlock(b)
		if ok && size < 1 {
			t.Fatalf("pipeline of %d DataNodes", size)
		}
	})
}
