//go:build !linux

package bench

import "os/exec"

// setDaemonDeathSignal does nothing where the kernel offers no parent-death signal: a
// spawned daemon is stopped by bench itself on every path bench lives to take.
func setDaemonDeathSignal(*exec.Cmd) {}
