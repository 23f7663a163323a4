package bench

import (
	"os/exec"
	"syscall"
)

// setDaemonDeathSignal has the kernel kill a spawned daemon when bench dies, so that a bench
// killed outright (SIGKILL, a test binary's timeout) leaves no daemon behind.
func setDaemonDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
