//go:build !linux

package bench

import (
	"errors"
	"os/exec"
	"time"
)

// setDaemonDeathSignal does nothing where the kernel offers no parent-death signal: a
// spawned daemon is stopped by bench itself on every path bench lives to take.
func setDaemonDeathSignal(*exec.Cmd) {}

// processCPU is read from /proc/<pid>/stat, which only Linux has in that form; elsewhere the
// daemon's CPU is not reported.
func processCPU(int) (time.Duration, error) {
	return 0, errors.New("the daemon's CPU time is read from Linux's /proc")
}
