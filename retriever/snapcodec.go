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
// more than the file holds, and nothing is trusted before check. It reads
// through a buffer of its own, where numbers are decoded in place.
type snapReader struct {
	f        *os.File
	src      io.Reader // the body, through the checksum
	crc      hash.Hash32
	buf      []byte
	pos, end int   // buf[pos:end] is read and not yet consumed
	body     int64 // the body's length
	left     int64 // bytes of the body not yet consumed
	err      error
	tmp      [8]byte
}

// snapBuffer is the size of a snapReader's buffer.
const snapBuffer = 1 << 20

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
	return &snapReader{f: f, src: crcReader{io.LimitReader(f, body), crc}, crc: crc, buf: make([]byte, snapBuffer), body: body, left: body}, nil
}

func (r *snapReader) fail() {
	if r.err == nil {
		r.err = errSnapCorrupt
	}
}

// want buffers at least n bytes (n ≤ len(r.buf)) when the body has them,
// and reports whether it does.
func (r *snapReader) want(n int) bool {
	if r.end-r.pos >= n {
		return true
	}
	r.end = copy(r.buf, r.buf[r.pos:r.end])
	r.pos = 0
	for r.end < n {
		k, err := r.src.Read(r.buf[r.end:])
		r.end += k
		if err != nil {
			break // the end of the body, or a failed read: too few bytes
		}
	}
	return r.end >= n
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
	r.left -= n
	for n > 0 {
		if r.pos == r.end && !r.want(1) {
			r.fail()
			return at
		}
		k := min(n, int64(r.end-r.pos))
		r.pos += int(k)
		n -= k
	}
	return at
}

func (r *snapReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	if r.pos < r.end && r.buf[r.pos] < 0x80 { // one byte, the most common
		v := r.buf[r.pos]
		r.pos++
		r.left--
		return uint64(v)
	}
	r.want(binary.MaxVarintLen64) // fewer only at the end of the body
	v, n := binary.Uvarint(r.buf[r.pos:r.end])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.pos += n
	r.left -= int64(n)
	return v
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
	r.left -= int64(len(p))
	for len(p) > 0 {
		if r.pos == r.end {
			if len(p) >= len(r.buf) { // straight into p
				if _, err := io.ReadFull(r.src, p); err != nil {
					r.fail()
				}
				return
			}
			if !r.want(1) {
				r.fail()
				return
			}
		}
		k := copy(p, r.buf[r.pos:r.end])
		r.pos += k
		p = p[k:]
	}
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

// check ends the read: the whole body was read and its checksum is the
// trailer's.
func (r *snapReader) check() error {
	if r.err != nil {
		return r.err
	}
	if r.left != 0 || r.pos != r.end {
		return fmt.Errorf("%w: %d bytes left over", errSnapCorrupt, r.left)
	}
	var sum [4]byte
	if _, err := r.f.ReadAt(sum[:], r.body); err != nil {
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

// uvarintLen is how many bytes binary.AppendUvarint writes for v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
