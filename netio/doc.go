// Package netio is the broker's network layer on gnet event loops: it reads
// length-prefixed request frames, hands each decoded request to a Handler, and writes the
// responses back in request order per connection — bytes with writev straight from the
// handler's buffers (arena chunks) and segment data with sendfile from the page cache.
//
// Concurrency. gnet runs one event loop per core; OnTraffic and everything that touches a
// socket run on the loop that owns the connection, and never block. A Handler gets each
// request on the loop and must not block either: it hands the work to a shard and
// returns. The shard answers with Conn.Respond, which is safe from any goroutine: it
// fills the request's slot and wakes the loop (gnet's Conn.Wake), which writes whatever
// is ready at the head of the queue.
//
// Writing. netio never uses gnet's outbound buffer (it grows without bound and cannot be
// combined with sendfile): it writes with writev and sendfile on the non-blocking socket
// itself. On EAGAIN it waits for writability on Go's netpoller through a dup of the
// socket (one goroutine per blocked connection, re-checking with poll because a
// RawConn.Write wait clears the readiness it reports), then resumes on the loop. A slow
// consumer therefore costs its connection a parked goroutine, never its loop.
//
// Limits. A frame larger than MaxFrame is refused from its length field, before anything
// is allocated; at most MaxInflight requests per connection are outstanding (further
// frames wait in the socket buffer and gnet's inbound buffer, which is capped at
// MaxInbound: past it the connection is closed). A malformed frame is answered with an
// error frame and the connection closed after it is written.
package netio
