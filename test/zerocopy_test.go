package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// scrape reads the broker's metrics and returns the value of one sample line (its name
// with labels, as printed), or -1.
func scrape(t testing.TB, addr, sample string) float64 {
	t.Helper()
	return testbroker.Scrape(t, addr, sample)
}

// TestZeroCopyFetch fetches data that lives only in segment files (after a restart the
// arena is empty) and checks from the broker's own counters that the records went out by
// sendfile: the bytes written from user space are only the frame headers.
func TestZeroCopyFetch(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	createTopic(t, w, "z", 1)
	big := make([]byte, 0, 1<<20)
	for i := range 16 {
		big = append(big[:0], records(0, -1, fmt.Sprintf("%0900d", i), 60)...)
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("z"), Version: 1, Batches: big}))
	}
	b.Stop()
	b.Restart()
	w = dial(t, b.Addr)
	sent0 := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="sendfile"}`)
	copied0 := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="copy"}`)
	// Read everything, 256 KiB at a time, through the sendfile path.
	var records int
	for off := int64(0); ; {
		resp := w.call(&wire.FetchRequest{Topic: []byte("z"), Offset: off, MaxBytes: 256 << 10})
		mustOK(t, resp)
		fr := resp.Body.(*wire.FetchResponse)
		if len(fr.Records) == 0 {
			break
		}
		records += len(fr.Records)
		off = lastOffset(t, fr.Records) + 1
	}
	sent := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="sendfile"}`) - sent0
	copied := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="copy"}`) - copied0
	if records == 0 || sent < float64(records) {
		t.Fatalf("sendfile sent %v bytes for %d bytes of records", sent, records)
	}
	// Copied bytes are response headers only: well under 1% of the records.
	if copied > sent/100 {
		t.Fatalf("%v bytes copied from user space for %v sent by sendfile", copied, sent)
	}
	t.Logf("segment-resident fetch: %.0f bytes by sendfile, %.0f bytes copied (%.4f per byte)", sent, copied, copied/sent)
}

// TestProduceCopiesAndDirectIO produces from a real client connection and checks the
// broker's own account of the produce path: every accepted byte was copied into the
// arena once (sluice_produce_copied_bytes_total counts that copy and netio's copies of
// frames a socket read cut in two, so it lies between 1 and 2 times the bytes produced),
// and sluice_partition_direct_io says what the data directory's filesystem does with
// O_DIRECT, probed here independently.
func TestProduceCopiesAndDirectIO(t *testing.T) {
	dir := t.TempDir()
	b := testbroker.Start(t, dir, "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	createTopic(t, w, "c", 1)
	var sent int
	for i := range 64 {
		batch := records(0, -1, fmt.Sprintf("%0500d", i), 100)
		sent += len(batch)
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("c"), Version: 1, Batches: batch}))
	}
	produced := scrape(t, b.MetricsAddr, `sluice_produce_bytes_total`)
	copied := scrape(t, b.MetricsAddr, `sluice_produce_copied_bytes_total`)
	if produced != float64(sent) {
		t.Fatalf("sluice_produce_bytes_total = %v, want the %d batch bytes sent", produced, sent)
	}
	if copied < produced || copied > 2*produced {
		t.Fatalf("%v bytes copied for %v produced: want between one and two copies per byte", copied, produced)
	}
	t.Logf("%.3f user-space copies per produced byte", copied/produced)

	want := 0.0
	if directIOAccepted(t, dir) {
		want = 1
	}
	// The persister opens the segment file with O_DIRECT when it first writes it.
	waitMetric(t, b.MetricsAddr, `sluice_partition_direct_io{partition="0",topic="c"}`, want)
}

// directIOAccepted reports whether the filesystem of dir opens files with O_DIRECT.
func directIOAccepted(t *testing.T, dir string) bool {
	t.Helper()
	path := filepath.Join(dir, "direct-probe")
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o644)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return false
		}
		t.Fatal(err)
	}
	unix.Close(fd)
	os.Remove(path)
	return true
}
