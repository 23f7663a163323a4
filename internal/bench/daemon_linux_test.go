package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// utime and stime are counted from the last ')', whatever the command name holds.
func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want uint64
	}{
		{"4242 (svrpd) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 9 0 100 0 0\n", 287},
		{"7 (a) (b c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0\n", 3},
	} {
		got, err := parseStatCPU([]byte(tc.stat))
		if err != nil || got != tc.want {
			t.Errorf("parseStatCPU(%q) = %d, %v; want %d", tc.stat, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "42 svrpd S 1", "42 (svrpd) S 1 2 3", "42 (svrpd) S 1 42 42 0 -1 0 0 0 0 0 x 2 0"} {
		if got, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) = %d, want an error", bad, got)
		}
	}
}

// This process's CPU time, read as a daemon's is, grows while it works and not by more than
// its threads could have run.
func TestProcessCPU(t *testing.T) {
	start := time.Now()
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var used time.Duration
	for used < 100*time.Millisecond {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("10 s of spinning counted as %s of CPU", used)
		}
		now, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		used = now - before
	}
	if wall := time.Since(start); used > wall*time.Duration(runtime.NumCPU())+time.Second/clockTicks {
		t.Errorf("%s of CPU in %s on %d CPUs", used, wall, runtime.NumCPU())
	}
}

// One verify's CPU time is positive and no more than the wall time it could have taken.
func TestVerifyTime(t *testing.T) {
	start := time.Now()
	v := verifyTime(t.Context(), 300*time.Millisecond)
	if v < time.Microsecond || v > 10*time.Millisecond || v > time.Since(start) {
		t.Fatalf("%s of CPU per verify", v)
	}
}
