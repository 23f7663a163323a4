//go:build !unix

package sigverify

import "time"

// processCPU is not measured here: the benchmarks then report cpu-ns/sig as 0.
func processCPU() time.Duration { return 0 }
