package testkit

import (
	"os"
	"testing"
)

// HeavyEnv names the variable that runs the heaviest load and flood tests: those that send
// hundreds of thousands of requests, or thousands of signed ones, each costing as much as a
// whole package of ordinary tests under the race detector. CI sets it (.ci/run); a plain go
// test leaves them out, and says so.
const HeavyEnv = "SVRPD_TEST_HEAVY"

// Heavy skips t unless HeavyEnv is set to 1.
func Heavy(t testing.TB) {
	t.Helper()
	if os.Getenv(HeavyEnv) != "1" {
		t.Skip(HeavyEnv + "=1 is not set: a heavy load test, run by CI, skipped")
	}
}
