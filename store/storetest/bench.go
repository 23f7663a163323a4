package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// Benchmarks. Each put is one Update, so the Badger figure includes an fsync.

// ScaleNode is node i of the benchmarks of a whole registry's table (docs/scale.md), as a
// daemon of a live network holds it: a short DID, a public IPv4 endpoint, one of a few
// regions and capability lists, a signature, first seen within the hour before now. Its key
// is the SHA-256 of i, so tables of any size hold the same nodes.
func ScaleNode(i int, now time.Time) store.Node {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	k := didkey.PublicKey(sha256.Sum256(seed[:]))
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	sig := "5nG1o7rf7Ta39j6dZosAi7PBAmE5uGEYCFAZZ3mr6F3ZJ8huKbWz8d6xVS6EXLbSRVRD8wAwoAC9w5BGDe6Nzr7u"
	caps := [][]string{{"inference"}, {"inference", "storage"}, {"relay"}}[i%3]
	region := []string{"eu-west", "us-east", "ap-south"}[i%3]
	return store.Node{Key: k, DID: d.String(), Endpoint: fmt.Sprintf("203.0.%d.%d:%d", i/250%250, i%250, 7000+i%1000),
		Capabilities: caps, Region: region, Signature: &sig, SignatureVerified: true,
		FirstSeen: now.Add(-time.Duration(i%3600) * time.Second), LastSeen: now}
}

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
