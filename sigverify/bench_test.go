package sigverify

import (
	"crypto/ed25519"
	"fmt"
	"testing"
)

// The benchmarks report ns/sig, the cost of one signature, so that the single and the batch
// figures of one run compare directly.

func BenchmarkCryptoEd25519(b *testing.B) {
	e := entries(1)[0]
	for b.Loop() {
		ed25519.Verify(e.Key, e.Msg, e.Sig)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sig")
}

func BenchmarkVerify(b *testing.B) {
	e := entries(1)[0]
	for b.Loop() {
		Verify(e.Key, e.Msg, e.Sig)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sig")
}

// BenchmarkCachedSingle is one signature checked alone by the Batcher's checker, its key's
// point already decoded: what a caller that finds the Batcher idle pays.
func BenchmarkCachedSingle(b *testing.B) {
	e := entries(1)[0]
	var c checker
	for b.Loop() {
		c.single(e)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sig")
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
				for b.Loop() {
					c.verify(es, ok)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sig")
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
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			e := es[i%len(es)]
			v.Verify(e.Key, e.Msg, e.Sig)
			i++
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sig")
}
