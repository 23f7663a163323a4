package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/store"
)

// ErrTargetNotEmpty is a copy refused because the target holds records already: a copy
// into it would merge two registries.
var ErrTargetNotEmpty = errors.New("the target store is not empty")

// ErrCountMismatch is a copy whose target, read back, does not hold what the source gave.
var ErrCountMismatch = errors.New("the target's counts differ from the source's")

// batchSize is how many records one target transaction writes: large enough that a commit
// (a disk sync, or a round trip to PostgreSQL) is shared by many records, small enough that
// a transaction stays within Badger's size bound and a retried one redoes little.
const batchSize = 1000

// writers is how many target transactions a copy keeps in flight.
const writers = 4

// progressEvery is how often a long copy says how far it is.
const progressEvery = 2 * time.Second

// Count is how many records of one kind the source gave and the target holds.
type Count struct {
	Kind           string
	Source, Target int
}

// Copy copies every record of from into to, which must be empty, and reads to back to
// verify the counts. It reads from in one read transaction, so what it copies is the
// source as it was at one instant, and writes to in transactions of batchSize records; on
// an error the target is left part-written, to be emptied before another try. It writes a
// line to progress every few seconds and one per kind.
func Copy(ctx context.Context, from, to store.Store, progress io.Writer) ([]Count, error) {
	now := time.Now()
	if err := to.View(ctx, checkEmpty); err != nil {
		return nil, err
	}
	counts := make([]Count, len(kinds))
	err := from.View(ctx, func(src store.Tx) error {
		for i, k := range kinds {
			n, err := copyKind(ctx, src, to, k, now, progress)
			if err != nil {
				return fmt.Errorf("copying %s: %w", k.name, err)
			}
			counts[i] = Count{Kind: k.name, Source: n}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = to.View(ctx, func(tx store.Tx) error {
		for i, k := range kinds {
			n, err := count(tx, k, now)
			if err != nil {
				return fmt.Errorf("counting %s in the target: %w", k.name, err)
			}
			counts[i].Target = n
		}
		return nil
	})
	if err != nil {
		return counts, err
	}
	for _, c := range counts {
		if c.Source != c.Target {
			return counts, fmt.Errorf("%w: %s: %d copied, %d in the target", ErrCountMismatch, c.Kind, c.Source, c.Target)
		}
	}
	return counts, nil
}

// copyKind copies the records of one kind, writers target transactions at a time: a store
// that commits transactions in groups (Badger) or runs them concurrently (PostgreSQL) then
// shares its syncs and round trips between them. The records of a kind do not depend on each
// other, so the order the batches commit in does not matter, except for an ordered kind,
// which one writer copies batch after batch.
func copyKind(ctx context.Context, src store.Tx, to store.Store, k kind, now time.Time, progress io.Writer) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start, last := time.Now(), time.Now()
	batches := make(chan []write)
	var wg sync.WaitGroup
	var written atomic.Int64
	inFlight := writers
	if k.ordered {
		inFlight = 1
	}
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range batches {
				err := to.Update(ctx, func(tx store.Tx) error {
					for _, w := range batch {
						if err := w(tx); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					cancel(err)
					continue
				}
				written.Add(int64(len(batch)))
			}
		}()
	}
	var batch []write
	send := func() error {
		select {
		case batches <- batch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		batch = make([]write, 0, batchSize)
		if time.Since(last) >= progressEvery {
			last = time.Now()
			n := written.Load()
			fmt.Fprintf(progress, "  %s: %d copied (%.0f/s)\n", k.name, n, float64(n)/time.Since(start).Seconds())
		}
		return nil
	}
	err := k.each(src, now, func(w write) error {
		batch = append(batch, w)
		if len(batch) < batchSize {
			return nil
		}
		return send()
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	close(batches)
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	n := int(written.Load())
	if err != nil {
		return n, err
	}
	fmt.Fprintf(progress, "%s: %d copied in %v\n", k.name, n, time.Since(start).Round(time.Millisecond))
	return n, nil
}

// count is the number of records of kind k in tx, as a copy would see them at now.
func count(tx store.Tx, k kind, now time.Time) (int, error) {
	n := 0
	err := k.each(tx, now, func(write) error { n++; return nil })
	return n, err
}

var errFound = errors.New("found a record")

// checkEmpty refuses a target holding any record of any kind, expired sessions included.
func checkEmpty(tx store.Tx) error {
	for _, k := range kinds {
		err := k.each(tx, time.Time{}, func(write) error { return errFound })
		if errors.Is(err, errFound) {
			return fmt.Errorf("%w: it holds %s", ErrTargetNotEmpty, k.name)
		}
		if err != nil {
			return fmt.Errorf("reading the target: %w", err)
		}
	}
	return nil
}
