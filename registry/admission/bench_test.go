package admission_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/admission"
)

// keyOf is the i-th made-up 32-byte id.
func keyOf(i int) [32]byte {
	var k [32]byte
	k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
	return k
}

// originOf spreads ids over addresses, 16 to an address, of many blocks and networks.
func originOf(i int) string {
	return netip.AddrFrom4([4]byte{byte(i >> 20), byte(i >> 12), byte(i >> 4), 1}).String()
}

// BenchmarkCount is a count from the store of a table of n entries, a tenth of them stale,
// as every sweep makes of the node table; it reports the table's heap per entry.
func BenchmarkCount(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			now := time.Unix(1_800_000_000, 0)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			tab := admission.New[[32]byte]("nodes", admission.Quota{Cap: n, PerGroup: [3]int{n, n, n}}, 10*time.Minute)
			count := func() {
				tab.BeginCount()
				for i := range n {
					seen := now
					if i%10 == 0 {
						seen = now.Add(-time.Hour)
					}
					tab.Counted(keyOf(i), originOf(i), seen, time.Time{})
				}
				tab.EndCount(true, now)
			}
			count()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/entry")
			b.ResetTimer()
			for b.Loop() {
				count()
			}
			runtime.KeepAlive(tab)
		})
	}
}

// BenchmarkReserve is a newcomer's admission to a full table: reserve, take the stalest
// entry, commit.
func BenchmarkReserve(b *testing.B) {
	const n = 100_000
	now := time.Unix(1_800_000_000, 0)
	tab := admission.New[[32]byte]("nodes", admission.Quota{Cap: n, PerGroup: [3]int{n, n, n}}, 10*time.Minute)
	for i := range n {
		tab.Add(keyOf(i), originOf(i), now.Add(-time.Hour), time.Time{})
	}
	i := n
	for b.Loop() {
		r := tab.Reserve(originOf(i), now)
		if id, ok := r.Next(); ok {
			r.Take(id)
		}
		r.Commit(keyOf(i), now, time.Time{})
		i++
	}
}
