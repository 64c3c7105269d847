//go:build !unix

package retriever

import (
	"errors"
	"os"
)

// mapFile is unavailable here: placeFloats reads the floats instead.
func mapFile(*os.File) ([]byte, error) { return nil, errors.New("no file mapping on this system") }

func unmapFile([]byte) error { return nil }
