// Package svrpdtest builds and runs the svrpd binary for tests that must run the daemon or
// the CLI as a separate process (crash, end-to-end, abuse and spawn tests): killing a process
// or reading what a person sees cannot be done with a goroutine. It is imported by tests only.
package svrpdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once    sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// BinaryEnv names a variable that holds the path of an svrpd binary built from the same
// tree, which Binary then returns instead of building one: .ci/run builds it once for every
// test package that runs svrpd, since each would otherwise link the same binary again.
const BinaryEnv = "SVRPD_TEST_BINARY"

// Binary builds github.com/svrp/svrp/svrpd once per test process and returns its path. The
// binary lives in a directory removed by Cleanup, which Main calls from the test package's
// TestMain. With BinaryEnv set it returns that binary, failing t if it is not a file.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s=%s: not an svrpd binary: %v", BinaryEnv, p, err)
		}
		return p
	}
	once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		dir, err := os.MkdirTemp("", "svrpd-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "svrpd")
		binOut, binErr = exec.Command(goBin, "build", "-o", binPath, "github.com/svrp/svrp/svrpd").CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build svrpd: %v\n%s", binErr, binOut)
	}
	return binPath
}

// Cleanup removes the binary Binary built, if any.
func Cleanup() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}
