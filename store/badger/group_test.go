package badger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/store"
)

// TestBadgerGroupCommit runs many Updates at once, so that they are committed in groups,
// and makes every third one fail after writing. A failing function must take back exactly
// its own writes — including its increment of a counter that the functions before and after
// it in the same group also increment — while the rest of its group commits. Half of them
// keep no undo log (ForTouches): their failure gives each function of the group a
// transaction of its own, with the same outcome.
func TestBadgerGroupCommit(t *testing.T) {
	s := openBadger(t, t.TempDir())
	errPlanned := errors.New("planned failure")
	const n = 300
	results := make([]error, n)
	testkit.Together(n, func(i int) {
		ctx := context.Background()
		if i%2 == 0 {
			ctx = store.ForTouches(ctx)
		}
		results[i] = s.Update(ctx, func(tx store.Tx) error {
			shared, err := tx.Counter("shared")
			if err != nil {
				return err
			}
			shared.Count++
			if err := tx.PutCounter("shared", shared); err != nil {
				return err
			}
			if err := tx.PutCounter(fmt.Sprintf("own/%03d", i), store.Counter{Count: i}); err != nil {
				return err
			}
			if i%3 == 0 {
				return errPlanned
			}
			return nil
		})
	})

	succeeded := 0
	for i, err := range results {
		switch {
		case i%3 == 0 && !errors.Is(err, errPlanned):
			t.Errorf("update %d: got %v, want the planned failure", i, err)
		case i%3 != 0 && err != nil:
			t.Errorf("update %d: %v", i, err)
		case err == nil:
			succeeded++
		}
	}
	err := s.View(context.Background(), func(tx store.Tx) error {
		shared, err := tx.Counter("shared")
		if err != nil {
			return err
		}
		if shared.Count != succeeded {
			t.Errorf("shared counter = %d, want %d (one per successful update)", shared.Count, succeeded)
		}
		own := 0
		err = tx.EachCounter(func(key string, c store.Counter) error {
			if key == "shared" {
				return nil
			}
			own++
			if c.Count%3 == 0 {
				t.Errorf("counter %s of a failed update was kept", key)
			}
			return nil
		})
		if own != succeeded {
			t.Errorf("%d own counters kept, want %d", own, succeeded)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBadgerCloseWaitsForQueuedUpdates closes the store while Updates are queued: each one
// either commits or reports that the store is closed, and none is left hanging.
func TestBadgerCloseWaitsForQueuedUpdates(t *testing.T) {
	s := openBadger(t, t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				return tx.PutCounter(fmt.Sprintf("c/%d", i), store.Counter{Count: i})
			})
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("update during close: %v", err)
		}
	}
}
