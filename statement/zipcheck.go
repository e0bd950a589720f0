package statement

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// MaxZipEntries bounds the files in a bill's zip (Alipay's holds two, the detail and
// the summary). archive/zip reads the whole central directory when it opens a zip,
// however many entries it holds (300,000 empty ones cost 70 MiB), so the count is
// checked first by walking at most this many directory headers.
const MaxZipEntries = 64

const (
	sigEOCD      = 0x06054b50
	sigZip64EOCD = 0x06064b50
	sigZip64Loc  = 0x07064b50
	sigDirHeader = 0x02014b50
	eocdLen      = 22
	dirHeaderLen = 46
)

// checkZipEntries refuses a zip whose central directory has more than limit entries,
// reading no more of it than limit headers. A zip whose directory it cannot find is left
// to archive/zip to refuse.
func checkZipEntries(f *os.File, limit int) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	dirOffset, ok, err := directoryOffset(f, size)
	if err != nil || !ok {
		return err
	}
	var h [dirHeaderLen]byte
	off := dirOffset
	for n := 0; ; n++ {
		if off+4 > size {
			return nil
		}
		if _, err := f.ReadAt(h[:4], off); err != nil {
			return nil
		}
		if binary.LittleEndian.Uint32(h[:4]) != sigDirHeader {
			return nil
		}
		if n == limit {
			return fmt.Errorf("%w: the zip holds more than %d files", ErrMalformedBill, limit)
		}
		if _, err := f.ReadAt(h[:], off); err != nil {
			return nil
		}
		off += dirHeaderLen + int64(binary.LittleEndian.Uint16(h[28:])) + int64(binary.LittleEndian.Uint16(h[30:])) + int64(binary.LittleEndian.Uint16(h[32:]))
	}
}

// directoryOffset finds the central directory from the end-of-central-directory
// record (and its zip64 form when the offset overflows 32 bits).
func directoryOffset(f io.ReaderAt, size int64) (int64, bool, error) {
	tail := int64(eocdLen + 65535)
	if tail > size {
		tail = size
	}
	buf := make([]byte, tail)
	if _, err := f.ReadAt(buf, size-tail); err != nil && err != io.EOF {
		return 0, false, err
	}
	at := -1
	for i := len(buf) - eocdLen; i >= 0; i-- {
		if binary.LittleEndian.Uint32(buf[i:]) == sigEOCD {
			at = i
			break
		}
	}
	if at < 0 {
		return 0, false, nil
	}
	off := int64(binary.LittleEndian.Uint32(buf[at+16:]))
	if off != 0xFFFFFFFF {
		return off, true, nil
	}
	// zip64: the locator sits right before the record and points at the zip64 record.
	locAt := size - tail + int64(at) - 20
	var loc [20]byte
	if locAt < 0 {
		return 0, false, nil
	}
	if _, err := f.ReadAt(loc[:], locAt); err != nil || binary.LittleEndian.Uint32(loc[:]) != sigZip64Loc {
		return 0, false, nil
	}
	recAt := int64(binary.LittleEndian.Uint64(loc[8:]))
	var rec [56]byte
	if recAt < 0 || recAt+56 > size {
		return 0, false, nil
	}
	if _, err := f.ReadAt(rec[:], recAt); err != nil || binary.LittleEndian.Uint32(rec[:]) != sigZip64EOCD {
		return 0, false, nil
	}
	return int64(binary.LittleEndian.Uint64(rec[48:])), true, nil
}
