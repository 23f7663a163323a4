package move

import (
	"context"
	"errors"
	"fmt"
	"io"
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

func copyKind(ctx context.Context, src store.Tx, to store.Store, k kind, now time.Time, progress io.Writer) (int, error) {
	start, last := time.Now(), time.Now()
	var batch []write
	n := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := to.Update(ctx, func(tx store.Tx) error {
			for _, w := range batch {
				if err := w(tx); err != nil {
					return err
				}
			}
			return nil
		})
		n += len(batch)
		batch = batch[:0]
		if time.Since(last) >= progressEvery {
			last = time.Now()
			fmt.Fprintf(progress, "  %s: %d copied (%.0f/s)\n", k.name, n, float64(n)/time.Since(start).Seconds())
		}
		return err
	}
	err := k.each(src, now, func(w write) error {
		batch = append(batch, w)
		if len(batch) < batchSize {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
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
