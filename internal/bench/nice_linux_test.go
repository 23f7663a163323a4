package bench

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestLowerSelf lowers a process of its own (this test binary again), so that the test
// binary's other tests keep their priority: every thread of the child but one ends at the
// nice value asked, threads it makes afterwards too, and the process it starts runs at
// normal priority.
func TestLowerSelf(t *testing.T) {
	if os.Getenv("SVRPD_BENCH_LOWER_SELF") == "child" {
		lowerSelfChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowerSelf$", "-test.v")
	cmd.Env = append(os.Environ(), "SVRPD_BENCH_LOWER_SELF=child")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the lowered process failed: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestLowerSelf")) {
		t.Fatalf("the lowered process ran no check:\n%s", out)
	}
}

func lowerSelfChild(t *testing.T) {
	const nice = 7
	start, err := lowerSelf(nice)
	if err != nil {
		t.Fatal(err)
	}
	// Make new threads: goroutines that hold their thread while others run.
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-hold
		}()
	}
	normal := 0
	for _, tid := range threads(t) {
		switch n := threadNice(tid); n {
		case nice:
		case 0:
			normal++
		default:
			t.Errorf("thread %d at nice %d, want %d", tid, n, nice)
		}
	}
	close(hold)
	wg.Wait()
	if normal != 1 {
		t.Errorf("%d threads at normal priority, want the one kept for starting children", normal)
	}
	var out bytes.Buffer
	child := exec.Command("cat", "/proc/self/stat")
	child.Stdout = &out
	if err := start(child); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	// nice is field 19 of /proc/<pid>/stat, counted from the command name's closing ')'.
	stat := out.String()
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if got, err := strconv.Atoi(fields[19-3]); err != nil || got != 0 {
		t.Errorf("the child started at nice %q, want 0", fields[19-3])
	}
	if _, err := lowerSelf(20); err == nil {
		t.Error("nice 20 accepted")
	}
}

func threads(t *testing.T) []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		tids = append(tids, tid)
	}
	if len(tids) < 2 {
		t.Fatalf("%d threads", len(tids))
	}
	return tids
}
