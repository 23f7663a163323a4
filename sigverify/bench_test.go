package sigverify

import (
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"
)

// The benchmarks report ns/sig, the wall time of one signature, and cpu-ns/sig, the
// process's CPU time per signature, which stays comparable when other work shares the
// machine.

// perSig reports the figures of b's loop over n signatures per iteration; cpu0 is
// processCPU() as the loop began.
func perSig(b *testing.B, n int, cpu0 time.Duration) {
	sigs := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/sigs, "ns/sig")
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/sigs, "cpu-ns/sig")
}

func BenchmarkCryptoEd25519(b *testing.B) {
	e := entries(1)[0]
	cpu0 := processCPU()
	for b.Loop() {
		ed25519.Verify(e.Key, e.Msg, e.Sig)
	}
	perSig(b, 1, cpu0)
}

func BenchmarkVerify(b *testing.B) {
	e := entries(1)[0]
	cpu0 := processCPU()
	for b.Loop() {
		Verify(e.Key, e.Msg, e.Sig)
	}
	perSig(b, 1, cpu0)
}

// BenchmarkCachedSingle is one signature checked alone by the Batcher's checker, its key's
// point already decoded: what a caller that finds the Batcher idle pays.
func BenchmarkCachedSingle(b *testing.B) {
	e := entries(1)[0]
	var c checker
	c.single(e)
	cpu0 := processCPU()
	for b.Loop() {
		c.single(e)
	}
	perSig(b, 1, cpu0)
}

// BenchmarkBatch checks batches of n honest signatures, and of n with one bad one, whose
// R still decodes: the price one forged heartbeat makes the honest ones in its batch pay.
// The checker is reused, so the keys' points are decoded once, as in a running Batcher.
func BenchmarkBatch(b *testing.B) {
	for _, n := range []int{2, 4, 8, 16, 32, 64} {
		for _, bad := range []bool{false, true} {
			name := fmt.Sprintf("n=%d", n)
			var spoil []int
			if bad {
				name += "/one-bad"
				spoil = []int{n / 3}
			}
			b.Run(name, func(b *testing.B) {
				es := entries(n, spoil...)
				ok := make([]bool, n)
				var c checker
				c.verify(es, ok)
				cpu0 := processCPU()
				for b.Loop() {
					c.verify(es, ok)
				}
				perSig(b, n, cpu0)
			})
		}
	}
}

// BenchmarkBatcher is many callers at once on one Batcher, each verifying in turn.
func BenchmarkBatcher(b *testing.B) {
	es := entries(256)
	v := NewBatcher()
	defer v.Close()
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			e := es[i%len(es)]
			v.Verify(e.Key, e.Msg, e.Sig)
			i++
		}
	})
	perSig(b, 1, cpu0)
}
