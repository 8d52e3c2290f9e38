package hdfs

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
)

// Appends that leave out a replica. colinmarc/hdfs appends to a file's last block
// without asking the NameNode for a new generation stamp (the Java client does, with
// updateBlockForPipeline and updatePipeline), and writes to the DataNodes the NameNode
// lists for the block. A DataNode whose replica the NameNode does not list at that
// moment (its report of the last round not in yet: a paused or busy DataNode; or
// declared dead) is left out of the round, and its replica, shorter, keeps the same
// generation stamp: nothing tells it apart from a current one. When it is reported
// while the block is being written again and that round is abandoned (a broker killed,
// a NameNode restarted, a timeout), lease recovery takes the length of the finalized
// replica it finds, the stale one, and cuts every round it missed out of the file,
// acknowledged or not. The distributed chaos test lost the tail of a partition that way
// with three DataNodes (RELIABILITY.md).
//
// So an append is only written through a pipeline of exactly as many DataNodes as the
// file has replicas: every acknowledged round is then on every replica the NameNode
// knows of. Fewer is a replica left out (the chaos test's case: a file created while a
// DataNode was down, whose copy to that DataNode, made for the missing replica, was
// reported a moment after an append had left it out; the next round's pipeline met
// it, failed, and recovery cut the file back to it). More is a replica the NameNode
// has not dropped yet, possibly one that came back stale after its DataNode was
// declared dead. The pipeline's DataNodes are not in colinmarc/hdfs's API, but
// they are in the first message the client sends on the first DataNode's connection
// (OpWriteBlockProto: the stage and the downstream targets), which the connection
// wrappers below read before it leaves (guardConn). Any other append pipeline fails
// the round's first write with errPipelineMismatch before a byte of data is sent; the
// writer completes the file unchanged and writes the round into a new file, whose
// block's pipeline the NameNode chooses from the live DataNodes (Writer.Commit).

// errPipelineMismatch is the refusal of an append pipeline that does not reach exactly
// the file's replicas.
var errPipelineMismatch = errors.New("hdfs: the append's pipeline does not reach exactly the block's replicas")

// pipelineGuard holds what the next append pipeline of one client must reach, read by
// the DataNode connections that client dials. Each client of a Conn has its own (its
// generation's): a round that Conn.do abandoned after a timeout goes on alone with the
// client the Conn dropped, and what it sets or clears as it ends must not reach the
// round that runs next on a new client (a shared guard let an abandoned round's end
// switch the next round's check off). A client's calls are serialized, so the round
// that sets want is the one whose pipeline is checked.
type pipelineGuard struct {
	want atomic.Int32 // DataNodes an append pipeline must reach; 0: no check
	seen atomic.Int32 // DataNodes in the last write pipeline set up; 0: none read
}

// guardConn is a DataNode connection whose first write, the operation request, is
// checked against its guard before it is sent.
type guardConn struct {
	net.Conn
	g       *pipelineGuard
	refused *atomic.Uint64 // the Conn's count of refused pipelines
	checked atomic.Bool
}

// Write sends b, unless b is the first write and sets up an append pipeline of another
// size than the guard wants: then the connection is closed and nothing is sent.
func (c *guardConn) Write(b []byte) (int, error) {
	if c.checked.CompareAndSwap(false, true) {
		if size, appending, ok := parseWriteBlock(b); ok {
			c.g.seen.Store(int32(size))
			if want := int(c.g.want.Load()); appending && want > 0 && size != want {
				c.Conn.Close()
				c.refused.Add(1)
				return 0, fmt.Errorf("%w: %d of its %d DataNodes", errPipelineMismatch, size, want)
			}
		}
	}
	return c.Conn.Write(b)
}

// Data transfer protocol constants (Hadoop's DataTransferProtocol, as colinmarc/hdfs
// writes it: a 2-byte version, a 1-byte opcode, a varint-prefixed protobuf message).
const (
	dataTransferVersion = 28
	opWriteBlock        = 0x50
	// OpWriteBlockProto's fields and its stage for an append.
	writeBlockTargets     = 2
	writeBlockStage       = 4
	stagePipelineAppend   = 0 // PIPELINE_SETUP_APPEND
	stageAppendRecovery   = 1 // PIPELINE_SETUP_APPEND_RECOVERY
	writeBlockMinRequestB = 4
)

// parseWriteBlock reads a WRITE_BLOCK request: the pipeline's size (the first
// DataNode and its downstream targets) and whether it appends to an existing replica.
// ok is false for anything else (a read, a checksum request) or what it cannot parse.
func parseWriteBlock(b []byte) (size int, appending, ok bool) {
	if len(b) < writeBlockMinRequestB || b[0] != 0 || b[1] != dataTransferVersion || b[2] != opWriteBlock {
		return 0, false, false
	}
	msg, n := protowire.ConsumeBytes(b[3:])
	if n < 0 {
		return 0, false, false
	}
	size, stage := 1, int64(-1)
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return 0, false, false
		}
		msg = msg[n:]
		if num == writeBlockStage && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return 0, false, false
			}
			stage = int64(v)
		}
		if num == writeBlockTargets && typ == protowire.BytesType {
			size++
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return 0, false, false
		}
		msg = msg[n:]
	}
	if stage < 0 {
		return 0, false, false
	}
	return size, stage == stagePipelineAppend || stage == stageAppendRecovery, true
}
