package test

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// fillTopic writes about total bytes of 64 KiB batches of 1 KiB records to partition 0.
func fillTopic(b *testing.B, w *wireConn, topic string, total int) {
	var req []byte
	value := make([]byte, 1000)
	for written := 0; written < total; written += len(req) {
		req = req[:0]
		for len(req) < 1<<20 {
			req = append(req, records(0, -1, string(value), 63)...)
		}
		mustOK(b, w.call(&wire.ProduceRequest{Topic: []byte(topic), Version: 1, Batches: req}))
	}
}

// BenchmarkFetchFromPageCache reads a 256 MiB partition from segment files (the broker was
// restarted, so nothing is in the arena; the files are in the page cache) with 1 MiB and
// 4 MiB fetches over loopback, one at a time, against the ceiling measured in the same run: a plain server
// sending the same segment file with sendfile in 1 MiB chunks to the same reading loop.
// Goal: fetch >= 0.85 of the ceiling.
func BenchmarkFetchFromPageCache(b *testing.B) {
	for _, maxBytes := range []uint32{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("fetch=%dMiB", maxBytes>>20), func(b *testing.B) { benchFetch(b, maxBytes) })
	}
}

func benchFetch(b *testing.B, maxBytes uint32) {
	const total = 256 << 20
	br := testbroker.Start(b, b.TempDir())
	w := dial(b, br.Addr)
	createTopic(b, w, "pc", 1)
	fillTopic(b, w, "pc", total)
	br.Stop()
	br.Restart()
	w = dial(b, br.Addr)
	segs, _ := filepath.Glob(filepath.Join(br.Dir, "pc", "0", "*.log"))
	ceiling := startSendfileServer(b, segs[0])
	buf := make([]byte, 2*maxBytes)
	var tFetch, tRaw time.Duration
	var nFetch, nRaw int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		nFetch += fetchAll(b, w, buf, maxBytes)
		tFetch += time.Since(t0)
		t1 := time.Now()
		nRaw += readSendfile(b, ceiling, buf)
		tRaw += time.Since(t1)
	}
	b.SetBytes(nFetch / int64(b.N))
	fetch, raw := float64(nFetch)/tFetch.Seconds(), float64(nRaw)/tRaw.Seconds()
	b.ReportMetric(fetch/1e6, "fetch-MB/s")
	b.ReportMetric(raw/1e6, "sendfile-MB/s")
	b.ReportMetric(fetch/raw, "fetch/ceiling")
}

// fetchAll reads the whole partition with 1 MiB fetches, reading each response frame
// into buf without decoding the records (the consumer's cost is measured elsewhere).
func fetchAll(b *testing.B, w *wireConn, buf []byte, maxBytes uint32) int64 {
	var n int64
	for off := int64(0); ; {
		w.send(&wire.FetchRequest{Topic: []byte("pc"), Offset: off, MaxBytes: maxBytes})
		frame, err := w.readFrameInto(buf)
		if err != nil {
			b.Fatal(err)
		}
		var resp wire.Response
		if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
			b.Fatal(err)
		}
		fr := resp.Body.(*wire.FetchResponse)
		if len(fr.Records) == 0 {
			return n
		}
		n += int64(len(frame))
		off = lastOffset(b, fr.Records) + 1
	}
}

// startSendfileServer serves path with sendfile in 1 MiB chunks to every connection.
func startSendfileServer(b *testing.B, path string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				f, err := os.Open(path)
				if err != nil {
					return
				}
				defer f.Close()
				fi, _ := f.Stat()
				raw, _ := c.(*net.TCPConn).SyscallConn()
				var off int64
				raw.Write(func(fd uintptr) bool {
					for off < fi.Size() {
						_, err := unix.Sendfile(int(fd), int(f.Fd()), &off, int(min(fi.Size()-off, 1<<20)))
						if err == unix.EAGAIN {
							return false
						}
						if err != nil {
							return true
						}
					}
					return true
				})
			}()
		}
	}()
	return ln.Addr().String()
}

// readSendfile reads everything the ceiling server sends, 1 MiB at a time.
func readSendfile(b *testing.B, addr string, buf []byte) int64 {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var n int64
	for {
		k, err := io.ReadFull(c, buf[:1<<20])
		n += int64(k)
		if err != nil {
			return n
		}
	}
}
