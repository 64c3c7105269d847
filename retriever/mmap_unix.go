//go:build unix

package retriever

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps f privately: reads come from the file's pages, writes go to
// private copies (copy-on-write) and never reach the file.
func mapFile(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }
