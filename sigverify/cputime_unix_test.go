//go:build unix

package sigverify

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system: on a machine other
// work shares, the cost of an operation that wall time would inflate.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
