package store_test

import (
	"testing"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}

func BenchmarkMemoryPutNode(b *testing.B) {
	storetest.BenchPutNode(b, store.NewMemory())
}

func BenchmarkMemoryGetNode(b *testing.B) {
	storetest.BenchGetNode(b, store.NewMemory())
}
