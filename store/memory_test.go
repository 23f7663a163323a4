package store

import "testing"

func TestMemory(t *testing.T) {
	runSuite(t, func(*testing.T) Store { return NewMemory() })
}

func BenchmarkMemoryPutNode(b *testing.B) {
	benchPutNode(b, NewMemory())
}

func BenchmarkMemoryGetNode(b *testing.B) {
	benchGetNode(b, NewMemory())
}
