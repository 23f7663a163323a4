package badger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

// TestBadgerCompactsOnDemand: with Badger's polling compactors off, writes that flush many
// memtables still leave level 0 compacted (and so never stall), and an idle store compacts
// nothing.
func TestBadgerCompactsOnDemand(t *testing.T) {
	if testing.Short() {
		t.Skip("writes some 200 MiB")
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := s.(*badgerStore)
	// 13 memtables' worth, each flush one level-0 table: without compaction level 0 would
	// hold 13 tables, beyond badgerL0Tables and close to a stall.
	big := strings.Repeat("x", 256<<10)
	for i := range 13 * badgerMemTableSize / len(big) {
		n := store.Node{Key: storetest.Key(i), DID: "did:svrp:n:x", Endpoint: big}
		if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutNode(n) }); err != nil {
			t.Fatal(err)
		}
	}
	// The last flushes happen after the last commit; one more write wakes the compactor.
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutCounter("c", store.Counter{Count: 1}) }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The compactor may still be at work: wait for it, within a bound (Close would compact
	// level 0 itself, so it cannot be what the test looks at).
	deadline := time.Now().Add(time.Minute)
	for b.db.Levels()[0].NumTables > badgerL0Tables+1 {
		if time.Now().After(deadline) {
			t.Fatalf("level 0 holds %d tables a minute after the writes; want at most %d", b.db.Levels()[0].NumTables, badgerL0Tables+1)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
