//go:build unix

package registry_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// processCPU is the CPU time, user and system, the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRegisterLog is the cost of a first registration (an Ed25519 verification, the
// record and the address counters written) with its log entry and without, side by side in
// one run, on the memory store (CPU alone) and on Badger. cpu-ns/op is the process's CPU
// time (user and system) per registration, which a disk's waits do not inflate.
func BenchmarkRegisterLog(b *testing.B) {
	const pool = 4096
	bodies := make([][]byte, pool)
	for i := range bodies {
		n := newNode(b, fmt.Sprintf("bench-log-%d", i))
		bodies[i] = mustJSON(b, n.registration(b, fmt.Sprintf("203.0.%d.%d:7000", i/250, i%250+1)))
	}
	stores := map[string]func(b *testing.B) store.Store{
		"memory": func(*testing.B) store.Store { return store.NewMemory() },
		"badger": benchStores()[0].open,
	}
	for _, name := range []string{"memory", "badger"} {
		for _, logged := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/log=%v", name, logged), func(b *testing.B) {
				if b.N > pool {
					b.Skipf("%d registrations, %d keys: run with -benchtime %dx or fewer", b.N, pool, pool)
				}
				st := stores[name](b)
				b.Cleanup(func() { st.Close() })
				svc, err := registry.New(registry.Config{Store: st, Limits: limits.Limits{RegisterAddressLimit: 1 << 30, AddressBlockFactor: 1 << 20}})
				if err != nil {
					b.Fatal(err)
				}
				if !logged {
					registry.LogRegistrationsOff(svc)
				}
				h := httpapi.New(svc)
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				for i := range b.N {
					if w := benchPost(b, h, "/api/v1/register", bodies[i]); w.Code != 200 {
						b.Fatalf("register: %d %s", w.Code, w.Body)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
