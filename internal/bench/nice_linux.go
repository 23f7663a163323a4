package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// The abuse scenario's attack runs below the daemon and the honest clients in CPU priority.
// In the field an attacker spends its own machines' CPU; on the one machine bench shares with
// the daemon, an attack sent at the daemon's priority takes CPU the daemon would otherwise
// have, and that would be counted as the registry's slowness. The daemon still does all the
// work the attack makes for it, at normal priority.
//
// Linux keeps a nice value per thread, and a new thread or process takes the value of the
// thread that made it. So bench lowers every thread of its own but one, which it keeps
// locked at normal priority and starts every child process from. The Go runtime makes no
// thread from a locked one (it asks its template thread, which is lowered with the rest), so
// the threads bench makes later are lowered too.

// lowerSelf lowers every thread of this process to nice, but for one kept at normal priority,
// and returns the function that starts a child process from that thread. Raising a nice
// value needs no privilege; the kept thread is never raised, so none is needed at all.
func lowerSelf(nice int) (start func(*exec.Cmd) error, err error) {
	if nice < 1 || nice > 19 {
		return nil, fmt.Errorf("nice %d: want 1 to 19", nice)
	}
	run := make(chan func())
	kept := make(chan int)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread serves bench's starts until it exits
		kept <- syscall.Gettid()
		for f := range run {
			f()
		}
	}()
	if err := reniceAllBut(<-kept, nice); err != nil {
		return nil, err
	}
	return func(cmd *exec.Cmd) error {
		done := make(chan error, 1)
		run <- func() { done <- cmd.Start() }
		return <-done
	}, nil
}

// reniceAllBut sets nice on every thread of this process but keep. A thread made while it
// runs may copy a value not yet lowered, so it goes over the list again until a pass finds
// every thread lowered.
func reniceAllBut(keep, nice int) error {
	const passes = 20
	for range passes {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		lowered := true
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || tid == keep {
				continue
			}
			if threadNice(tid) == nice {
				continue
			}
			lowered = false
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("lowering thread %d to nice %d: %w", tid, nice, err)
			}
		}
		if lowered {
			return nil
		}
	}
	return fmt.Errorf("threads kept appearing at another nice value after %d passes", passes)
}

// threadNice is a thread's nice value, or 0 when it is gone. The raw system call answers
// 20 − nice, so that no success is negative.
func threadNice(tid int) int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return 0
	}
	return 20 - p
}
