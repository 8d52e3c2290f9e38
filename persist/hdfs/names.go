package hdfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// dataSuffix and indexSuffix end the names of data files and of their indexes.
const (
	dataSuffix  = ".log"
	indexSuffix = ".index"
)

// PartitionDir returns the directory of a partition's files under root.
func PartitionDir(root, topic string, partition int) string {
	return path.Join(root, topic, strconv.Itoa(partition))
}

// fileName returns the name of the data file of the given epoch starting at base.
func fileName(base int64, epoch uint64) string {
	return fmt.Sprintf("%020d.%020d%s", base, epoch, dataSuffix)
}

// parseName reads a data file's name; ok is false for any other name.
func parseName(name string) (base int64, epoch uint64, ok bool) {
	s, found := strings.CutSuffix(name, dataSuffix)
	// Digits only: ParseInt and ParseUint also take a sign ("+000…").
	if !found || len(s) != 41 || s[20] != '.' || strings.TrimLeft(s[:20], "0123456789") != "" ||
		strings.TrimLeft(s[21:], "0123456789") != "" {
		return 0, 0, false
	}
	b, err1 := strconv.ParseInt(s[:20], 10, 64)
	e, err2 := strconv.ParseUint(s[21:], 10, 64)
	if err1 != nil || err2 != nil || b < 0 {
		return 0, 0, false
	}
	return b, e, true
}
