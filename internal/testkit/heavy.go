package testkit

import (
	"os"
	"strconv"
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

// BenchNodesEnv names the variable that sizes the benchmarks of a whole registry's table
// (docs/scale.md): how many nodes they hold.
const BenchNodesEnv = "SVRPD_BENCH_NODES"

// BenchNodes is the table size BenchNodesEnv asks for, 100,000 unless it is set; a value
// that is not a positive number fails b.
func BenchNodes(b testing.TB) int {
	b.Helper()
	v := os.Getenv(BenchNodesEnv)
	if v == "" {
		return 100_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number of nodes", BenchNodesEnv, v)
	}
	return n
}
