package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// setDaemonDeathSignal has the kernel kill a spawned daemon when bench dies, so that a bench
// killed outright (SIGKILL, a test binary's timeout) leaves no daemon behind.
func setDaemonDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on every
// architecture Go runs Linux on, whatever the kernel's own tick rate.
const clockTicks = 100

// processCPU is the CPU time a process has used so far, user and system, over all its
// threads (utime and stime of /proc/<pid>/stat), to the 10 ms of a clock tick.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading the daemon's CPU time: %w", err)
	}
	ticks, err := parseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("reading the daemon's CPU time: %w", err)
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}

// parseStatCPU returns utime + stime, in clock ticks, from the text of a /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may hold spaces or parentheses itself,
// so the fields are counted from the last ')': state is field 3, utime 14 and stime 15.
func parseStatCPU(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name in /proc/<pid>/stat")
	}
	fields := bytes.Fields(b[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, errors.New("too few fields in /proc/<pid>/stat")
	}
	var sum uint64
	for _, f := range [][]byte{fields[utime], fields[stime]} {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("a CPU time in /proc/<pid>/stat: %w", err)
		}
		sum += v
	}
	return sum, nil
}
