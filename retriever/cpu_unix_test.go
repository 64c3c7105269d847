//go:build unix

package retriever

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time the process has used (user and system, every
// thread: the collector's included). On a machine shared with other work
// it measures an operation's cost where wall time measures the queue for
// the cores as well (docs/BENCHMARKS.md reports both).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
