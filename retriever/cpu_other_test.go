//go:build !unix

package retriever

import "time"

// ProcessCPU is unknown here: the CPU metrics report 0.
func ProcessCPU() time.Duration { return 0 }
