package bench

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// warmFiles reads every regular file under dir once, to the end, and returns the bytes
// read: afterwards the files are in the page cache (as far as it holds them).
//
// Why: "consume from the page cache" compares a system with the sendfile ceiling, whose
// file was written through the page cache. Kafka's and NATS's segments are too, but
// sluice's persister writes its segments with O_DIRECT, past the page cache, so right
// after a restart sluice reads them from the disk (fincore showed 0 bytes of them
// cached; 2.2-2.6 GB/s from the disk against 3.7-3.9 GB/s once cached, sendfile
// 3.5-4.1, on 2026-12-06). The suite measures both: right after the restart, whatever
// each system left cached (MConsumeRestart), and with the files read first
// (MConsumePage).
func warmFiles(dir string) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) { // a server's file removed while we walk: nothing to warm
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		defer f.Close()
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf) // the struct: no WriteTo shortcut
		total += n
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", path, err)
		}
		return nil
	})
	return total, err
}
