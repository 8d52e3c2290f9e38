package local

import (
	"path/filepath"
	"strconv"
	"strings"
)

// File name suffixes of a segment.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	// deletedSuffix marks a file retention deleted and handed to Options.Discard.
	deletedSuffix = ".deleted"
)

// segmentName returns the path of a segment file: the 20-digit zero-padded base offset
// plus the suffix.
func segmentName(dir string, base int64, suffix string) string {
	var buf [20]byte
	digits := strconv.AppendInt(buf[:0], base, 10)
	name := make([]byte, 0, len(dir)+1+20+len(suffix))
	name = append(append(name, dir...), filepath.Separator)
	for range 20 - len(digits) {
		name = append(name, '0')
	}
	return string(append(append(name, digits...), suffix...))
}

// fileKind classifies a directory entry.
type fileKind int

const (
	kindForeign fileKind = iota
	kindLog
	kindIndex
	kindTimeIndex
	kindLeftover      // *.tmp or *.deleted from an interrupted rebuild or retention
	kindRecoveryPoint // the recovery point (recoverypoint.go)
)

// parseName classifies name and returns the base offset of segment files.
func parseName(name string) (fileKind, int64) {
	if strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, deletedSuffix) {
		return kindLeftover, 0
	}
	if name == recoveryPointName {
		return kindRecoveryPoint, 0
	}
	stem, suffix, ok := strings.Cut(name, ".")
	// Digits only: ParseInt also takes a sign, and a stray "+0000000000000000005.log"
	// would pass for a segment and, sorting before every real one, move the log's start.
	if !ok || len(stem) != 20 || strings.TrimLeft(stem, "0123456789") != "" {
		return kindForeign, 0
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return kindForeign, 0
	}
	switch "." + suffix {
	case logSuffix:
		return kindLog, base
	case indexSuffix:
		return kindIndex, base
	case timeIndexSuffix:
		return kindTimeIndex, base
	}
	return kindForeign, 0
}
