//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

// lowerSelf lowers bench's own threads, which only Linux gives a nice value each; elsewhere
// the attack runs at the daemon's priority.
func lowerSelf(int) (func(*exec.Cmd) error, error) {
	return nil, errors.New("lowering the attack's priority needs Linux's per-thread nice values")
}
