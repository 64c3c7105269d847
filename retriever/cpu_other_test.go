//go:build !unix

package retriever_test

import "time"

// processCPU is unknown here: the CPU metrics report 0.
func processCPU() time.Duration { return 0 }
