package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/translog"
)

// logEntry is the i-th entry of the log tests: any bytes do for a store.
func logEntry(i int) []byte { return fmt.Appendf(nil, "entry %d\n", i) }

// treeOf is the root hash of entries, computed from the entries alone.
func treeOf(t *testing.T, entries [][]byte) tlog.Hash {
	t.Helper()
	var hashes []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = hashes[x]
		}
		return out, nil
	})
	for i, e := range entries {
		hs, err := tlog.StoredHashes(int64(i), e, r)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hs...)
	}
	h, err := tlog.TreeHash(int64(len(entries)), r)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// checkLog checks that the store's log holds want, in order, and that its hashes give the
// root hash of those entries.
func checkLog(t *testing.T, s store.Store, want [][]byte) {
	t.Helper()
	View(t, s, func(tx store.Tx) error {
		head, err := translog.Head(tx, "test")
		if err != nil {
			return err
		}
		if head.Size != int64(len(want)) {
			t.Fatalf("log size %d, want %d", head.Size, len(want))
		}
		got, err := tx.LogEntries(0, head.Size)
		if err != nil {
			return err
		}
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Errorf("entry %d = %q, want %q", i, got[i], want[i])
			}
		}
		if h := treeOf(t, want); head.Hash != h {
			t.Errorf("root hash %v, want %v", head.Hash, h)
		}
		return nil
	})
}

func testLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	var want [][]byte
	for i := range 20 {
		Update(t, s, func(tx store.Tx) error {
			n, err := translog.AppendBytes(tx, logEntry(i))
			if n != int64(i) {
				t.Errorf("entry %d appended at %d", i, n)
			}
			return err
		})
		want = append(want, logEntry(i))
	}
	checkLog(t, s, want)

	// A transaction that fails keeps no entry; an append out of order writes nothing.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := translog.AppendBytes(tx, []byte("lost")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.AppendLog(5, []byte("again"), make([]tlog.Hash, 1))
	})
	if err == nil {
		t.Error("an append at index 5 of a log of 20 was accepted")
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.AppendLog(20, []byte("short"), nil)
	})
	if err == nil {
		t.Error("an append without its hashes was accepted")
	}
	checkLog(t, s, want)

	View(t, s, func(tx store.Tx) error {
		if _, err := tx.LogHashes([]int64{tlog.StoredHashCount(20)}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a hash beyond the log: %v", err)
		}
		if _, err := tx.LogEntries(19, 21); err == nil {
			t.Error("entries beyond the log were read")
		}
		if err := tx.AppendLog(20, []byte("x"), make([]tlog.Hash, 1)); !errors.Is(err, store.ErrWriteInView) {
			t.Errorf("AppendLog in a View: %v", err)
		}
		if _, err := tx.LogSeed(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the seed of a fresh store: %v", err)
		}
		return nil
	})

	seed, err := store.LogSeed(ctx, s)
	if err != nil || seed == ([32]byte{}) {
		t.Fatalf("LogSeed = %x, %v", seed, err)
	}
	if again, err := store.LogSeed(ctx, s); err != nil || again != seed {
		t.Errorf("LogSeed again = %x, %v; want %x", again, err, seed)
	}
}

// testConcurrentAppends appends from many goroutines at once: every append lands, each at
// its own index, and the hashes agree with the entries in the order they landed.
func testConcurrentAppends(t *testing.T, s store.Store) {
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				_, err := translog.AppendBytes(tx, logEntry(i))
				return err
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	View(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.LogEntries(0, workers)
		return err
	})
	seen := map[string]bool{}
	for _, e := range got {
		seen[string(e)] = true
	}
	if len(seen) != workers {
		t.Errorf("%d distinct entries of %d appended", len(seen), workers)
	}
	checkLog(t, s, got)
}
