package retriever

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"unsafe"
)

// snapWriter and snapReader are the snapshot's encoding: unsigned varints,
// length-prefixed strings, little-endian float32 and int8 arrays, and a
// CRC-32C of every byte, checked at the end.
type snapWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	pos int64 // bytes written
	err error
	buf [binary.MaxVarintLen64]byte
}

var snapTable = crc32.MakeTable(crc32.Castagnoli)

func newSnapWriter(w io.Writer) *snapWriter {
	return &snapWriter{w: bufio.NewWriterSize(w, 1<<20), crc: crc32.New(snapTable)}
}

func (s *snapWriter) bytes(b []byte) {
	if s.err != nil {
		return
	}
	s.crc.Write(b)
	s.pos += int64(len(b))
	_, s.err = s.w.Write(b)
}

// align4 pads with zeros to a multiple of 4 bytes, so that the float32s
// written next can be used in place from a mapping of the file.
func (s *snapWriter) align4() {
	var zero [4]byte
	s.bytes(zero[:(4-s.pos%4)%4])
}

func (s *snapWriter) uint(v uint64) { s.bytes(binary.AppendUvarint(s.buf[:0], v)) }

func (s *snapWriter) str(v string) {
	s.uint(uint64(len(v)))
	s.bytes(unsafe.Slice(unsafe.StringData(v), len(v)))
}

func (s *snapWriter) f32(v float32) {
	s.bytes(binary.LittleEndian.AppendUint32(s.buf[:0], math.Float32bits(v)))
}

// floats writes v as little-endian float32s.
func (s *snapWriter) floats(v []float32) {
	if len(v) == 0 {
		return
	}
	if nativeLittleEndian {
		s.bytes(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
		return
	}
	for _, x := range v {
		s.f32(x)
	}
}

func (s *snapWriter) int8s(v []int8) {
	if len(v) > 0 {
		s.bytes(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)))
	}
}

// finish writes the checksum and flushes.
func (s *snapWriter) finish() error {
	if s.err != nil {
		return s.err
	}
	sum := s.crc.Sum32()
	if _, err := s.w.Write(binary.LittleEndian.AppendUint32(nil, sum)); err != nil {
		return err
	}
	return s.w.Flush()
}

var nativeLittleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// errSnapCorrupt is every decoding failure: a truncated or altered file.
var errSnapCorrupt = errors.New("snapshot is corrupt or truncated")

// snapReader decodes a snapshot as it reads it, computing the CRC-32C of
// what it reads; check compares it with the trailer at the end. Every
// length is bounded by the bytes left, so a corrupt length cannot allocate
// more than the file holds, and nothing is trusted before check.
type snapReader struct {
	f    *os.File
	r    *bufio.Reader
	crc  hash.Hash32
	body int64 // the body's length
	left int64 // bytes of the body not yet read
	err  error
	buf  [8]byte
}

// align4 skips the writer's padding to a multiple of 4 bytes.
func (r *snapReader) align4() {
	pos := r.body - r.left
	r.skip((4 - pos%4) % 4)
}

// skip reads past n bytes (into the checksum), returning their offset in
// the file.
func (r *snapReader) skip(n int64) int64 {
	at := r.body - r.left
	if r.err != nil {
		return at
	}
	if n > r.left {
		r.fail()
		return at
	}
	if _, err := r.r.Discard(int(n)); err != nil {
		r.fail()
		return at
	}
	r.left -= n
	return at
}

// crcReader feeds what it reads to a checksum.
type crcReader struct {
	r   io.Reader
	crc hash.Hash32
}

func (c crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}

func newSnapReader(f *os.File) (*snapReader, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < 4 {
		return nil, errSnapCorrupt
	}
	body := fi.Size() - 4
	crc := crc32.New(snapTable)
	return &snapReader{f: f, r: bufio.NewReaderSize(crcReader{io.LimitReader(f, body), crc}, 1<<20), crc: crc, body: body, left: body}, nil
}

func (r *snapReader) fail() {
	if r.err == nil {
		r.err = errSnapCorrupt
	}
}

func (r *snapReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.fail()
		return 0
	}
	r.left -= int64(uvarintLen(v))
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// count reads a length that must not exceed the bytes left divided by the
// smallest size of an element.
func (r *snapReader) count(minSize int) int {
	v := r.uint()
	if v > uint64(max(r.left, 0))/uint64(max(minSize, 1)) {
		r.fail()
		return 0
	}
	return int(v)
}

// fill reads exactly len(p) bytes.
func (r *snapReader) fill(p []byte) {
	if r.err != nil {
		clear(p)
		return
	}
	if int64(len(p)) > r.left {
		r.fail()
		clear(p)
		return
	}
	if _, err := io.ReadFull(r.r, p); err != nil {
		r.fail()
		return
	}
	r.left -= int64(len(p))
}

func (r *snapReader) str() string {
	n := r.count(1)
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	r.fill(b)
	return unsafe.String(&b[0], n)
}

func (r *snapReader) f32() float32 {
	r.fill(r.buf[:4])
	return math.Float32frombits(binary.LittleEndian.Uint32(r.buf[:4]))
}

func (r *snapReader) int8s(n int) []int8 {
	if int64(n) > r.left {
		r.fail()
		return nil
	}
	out := make([]int8, n)
	if n > 0 {
		r.fill(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n))
	}
	return out
}

// check ends the read: the whole body was read and its checksum is the
// trailer's.
func (r *snapReader) check() error {
	if r.err != nil {
		return r.err
	}
	if r.left != 0 {
		return fmt.Errorf("%w: %d bytes left over", errSnapCorrupt, r.left)
	}
	if _, err := r.r.ReadByte(); err != io.EOF { // the limited body is used up
		return errSnapCorrupt
	}
	var sum [4]byte
	if _, err := io.ReadFull(r.f, sum[:]); err != nil {
		return errSnapCorrupt
	}
	if binary.LittleEndian.Uint32(sum[:]) != r.crc.Sum32() {
		return errSnapCorrupt
	}
	return nil
}

// blob reads a length-prefixed byte string into a buffer of its own.
func (r *snapReader) blob() []byte {
	n := r.count(1)
	b := make([]byte, n)
	r.fill(b)
	return b
}
