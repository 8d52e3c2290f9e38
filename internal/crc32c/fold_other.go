//go:build !amd64

package crc32c

// Only amd64 has the folding assembly; elsewhere Update is hash/crc32.
const canFold = false

const foldMin = 0

func fold(uint32, []byte) uint32 { panic("crc32c: fold without the assembly") }
