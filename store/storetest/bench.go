package storetest

import (
	"context"
	"testing"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// Benchmarks. Each put is one Update, so the Badger figure includes an fsync.

// BenchPutNode measures PutNode, one Update each, over BenchKeys; it closes s.
func BenchPutNode(b *testing.B, s store.Store) {
	defer s.Close()
	n := Node(Key(0))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n.Key = BenchKeys[i%len(BenchKeys)]
		n.LastSeen = Time(i)
		if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutNode(n) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchGetNode measures Node, one View each, over BenchKeys; it closes s.
func BenchGetNode(b *testing.B, s store.Store) {
	defer s.Close()
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for _, k := range BenchKeys {
			if err := tx.PutNode(Node(k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		err := s.View(context.Background(), func(tx store.Tx) error {
			_, err := tx.Node(BenchKeys[i%len(BenchKeys)])
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchKeys are the nodes a benchmark cycles through, as heartbeats would.
var BenchKeys = func() []didkey.PublicKey {
	ks := make([]didkey.PublicKey, 1024)
	for i := range ks {
		ks[i] = Key(i)
	}
	return ks
}()
