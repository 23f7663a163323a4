package abuse

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
)

// cpuTicks is the daemon's user plus system time, in clock ticks (/proc/<pid>/stat fields 14
// and 15).
func (d *daemon) cpuTicks() int {
	d.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.Pid()))
	if err != nil {
		d.t.Fatal(err)
	}
	// The command name, field 2, is in parentheses and may hold spaces: count after it.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// TestRow10IdleCost: an idle daemon on Badger with nothing stored uses under 0.2 % of a core.
// Linux counts CPU time in ticks of 10 ms, so over 20 s the bound is 4 ticks.
func TestRow10IdleCost(t *testing.T) {
	if testing.Short() {
		t.Skip("watches an idle daemon for 20 s")
	}
	d := start(t)
	// Start-up work is not idle: the window opens after a second in which the daemon used no
	// tick, however long a loaded machine makes the start.
	for deadline, last := time.Now().Add(testkit.WaitBound), d.cpuTicks(); ; {
		time.Sleep(time.Second)
		now := d.cpuTicks()
		if now == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never went a second without using the CPU within %v of its start", testkit.WaitBound)
		}
		last = now
	}
	const window = 20 * time.Second
	before := d.cpuTicks()
	time.Sleep(window)
	used := d.cpuTicks() - before
	const ticksPerSecond = 100 // USER_HZ on Linux
	limit := int(0.002 * window.Seconds() * ticksPerSecond)
	if used > limit {
		t.Fatalf("idle daemon used %d ticks in %s (%.2f %% of a core); want at most %d (0.2 %%)", used, window, float64(used)/window.Seconds(), limit)
	}
	t.Logf("idle daemon: %d ticks in %s (%.3f %% of a core)", used, window, float64(used)/window.Seconds())
}
