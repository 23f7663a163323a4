package badger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

type badgerStore struct {
	store.Defaults
	db     *dgbadger.DB
	closed atomic.Bool
	// closing orders Close after every Update that has already queued: Updates hold it for
	// reading while they queue, Close for writing while it stops the queue.
	closing sync.RWMutex
	// updates feeds the one goroutine that runs Update functions. Running them one at a
	// time matters for correctness, not only speed: Badger detects conflicts only on keys a
	// transaction read, not on keys another transaction inserts into a range it scanned, so
	// two concurrent Updates could each count the sessions of a node, see room for one more,
	// and both add one.
	updates chan *pendingUpdate
	stopped chan struct{}
	// The on-demand compactor (compact.go): commits send on wake; Close closes
	// stopCompact and waits for compacted.
	wake        chan struct{}
	stopCompact chan struct{}
	compacted   chan struct{}

	dir       string
	guard     *diskGuard
	unwatch   chan struct{}
	unwatched chan struct{}

	// observe is WithCommitObserver's function, or a no-op.
	observe func(updates int, took time.Duration, err error)
}

// pendingUpdate is one Update waiting for its function to run and its group to commit.
type pendingUpdate struct {
	fn   func(store.Tx) error
	done chan error
	// An Update ForTouches makes acknowledged state durable, so it may use the reserve,
	// and fails only when the store does, so it keeps no undo log in a shared transaction:
	// should it fail, every function of its group is given a transaction of its own, as when
	// an undo fails. An undo log reads each key before its first write.
	reserve bool
	noUndo  bool
}

const (
	// maxGroup bounds how many Update functions share one transaction, which keeps a group
	// well under Badger's transaction size limit for the store's small records.
	maxGroup = 64
	// updateQueue is how many Updates may wait while a group is written.
	updateQueue = 1024
	// gatherWindow is how long a group waits for more writers once writers have been
	// coming together. It is short beside the sync a group shares, so under load waiting
	// for company costs less than syncing alone: more writes a second and a lower median
	// latency (docs/performance.md has what svrpd bench's login scenario measured).
	gatherWindow = 200 * time.Microsecond
)

// panicked carries a panic out of an Update function to the goroutine that called Update.
type panicked struct{ value any }

func (p panicked) Error() string { return "store: update function panicked" }

var _ store.Store = (*badgerStore)(nil)

func (b *badgerStore) ReadCounters(ctx context.Context, keys ...string) ([]store.Counter, error) {
	return store.ReadCountersInView(ctx, b, keys...)
}

func (b *badgerStore) TouchNode(ctx context.Context, key didkey.PublicKey, seen time.Time) error {
	return store.TouchNodeInUpdate(ctx, b, key, seen)
}

func (b *badgerStore) ScanNodes(ctx context.Context, fn func(*store.Node) error) error {
	return store.ScanNodesInView(ctx, b, fn)
}

func (b *badgerStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return unavailable(store.ErrClosed)
	}
	// The transaction begins at the first read: a View whose reads are all served by the
	// node cache in front (a heartbeat's lookup) costs Badger nothing.
	tx := &badgerTx{db: b.db}
	defer func() {
		tx.Done = true
		if tx.txn != nil {
			tx.txn.Discard()
		}
	}()
	return unavailable(fn(tx))
}

// unavailable turns the refusals of a store closed or closing into [store.ErrUnavailable]: a
// request that a shutdown catches is told to come back, as one the disk refuses is.
func unavailable(err error) error {
	if errors.Is(err, store.ErrClosed) || errors.Is(err, dgbadger.ErrDBClosed) || errors.Is(err, dgbadger.ErrBlockedWrites) {
		return store.Unavailable(err)
	}
	return err
}

func (b *badgerStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	touches := store.IsForTouches(ctx)
	u := &pendingUpdate{fn: fn, done: make(chan error, 1), reserve: touches, noUndo: touches}
	b.closing.RLock()
	if b.closed.Load() {
		b.closing.RUnlock()
		return unavailable(store.ErrClosed)
	}
	b.updates <- u
	b.closing.RUnlock()
	err := <-u.done
	if p, ok := err.(panicked); ok {
		panic(p.value)
	}
	return unavailable(err)
}

// commitLoop runs queued Update functions until Close stops the queue. Each round takes
// what has queued, up to maxGroup, and commits it as one group.
func (b *badgerStore) commitLoop() {
	defer close(b.stopped)
	group := make([]*pendingUpdate, 0, maxGroup)
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	busy := false
	for u := range b.updates {
		group = append(group[:0], u)
		// While writers come together, wait a moment for more of them: a sync costs the same
		// for one update as for a full group, and waiting gatherWindow to share it is cheaper
		// than a sync of one's own. A lone writer never waits.
		var window <-chan time.Time
		if busy {
			gather.Reset(gatherWindow)
			window = gather.C
		}
	fill:
		for len(group) < maxGroup {
			select {
			case u, ok := <-b.updates:
				if !ok {
					break fill
				}
				group = append(group, u)
				continue
			default:
			}
			if window == nil {
				break
			}
			select {
			case u, ok := <-b.updates:
				if !ok {
					break fill
				}
				group = append(group, u)
			case <-window:
				window = nil
			}
		}
		gather.Stop()
		busy = len(group) > 1
		b.wakeCompactor()
		b.commitGroup(group)
	}
}

// commitGroup runs each function of a group in turn in one transaction and commits the
// transaction once. A function that fails has its own writes undone and gets its error;
// the others share the commit's result. Each function sees the writes of the functions
// before it, exactly as if they had committed one by one.
//
// The disk is looked at before the group runs, and the directory again after it committed:
// a function is refused while the store cannot take writes, and a commit into a directory
// removed meanwhile is reported as refused, never acknowledged.
func (b *badgerStore) commitGroup(group []*pendingUpdate) {
	start := time.Now()
	disk := b.guard.refresh(0)
	allowed := group[:0]
	for _, u := range group {
		if err := b.guard.allow(disk, u.reserve); err != nil {
			u.done <- err
			continue
		}
		allowed = append(allowed, u)
	}
	if len(allowed) == 0 {
		return
	}
	group = allowed
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	results := make([]error, len(group))
	var kept []int
	for i, u := range group {
		tx := &badgerTx{txn: txn, TxState: rules.TxState{Write: true}, undo: map[string]undoEntry{}}
		if u.noUndo {
			tx.undo = nil
		}
		err := runUpdate(u.fn, tx)
		if err == nil {
			kept = append(kept, i)
			continue
		}
		if rerr := tx.rollback(); rerr != nil || u.noUndo || errors.Is(err, dgbadger.ErrTxnTooBig) {
			// The shared transaction can no longer be trusted, or is full: give every
			// function of the group a transaction of its own. The Store contract allows a
			// function to run more than once.
			txn.Discard()
			for _, u := range group {
				err := b.commitAlone(u.fn)
				if err == nil && !b.guard.sameDir() {
					b.guard.refresh(0)
					err = store.ErrUnavailable
				}
				u.done <- err
			}
			return
		}
		results[i] = err
	}
	if len(kept) > 0 {
		var err error
		if cerr := txn.Commit(); cerr != nil {
			err = fmt.Errorf("store: failed to commit: %w", cerr)
		} else if !b.guard.sameDir() {
			b.guard.refresh(0)
			err = store.ErrUnavailable
		}
		b.observe(len(group), time.Since(start), err)
		for _, i := range kept {
			results[i] = err
		}
	}
	for i, u := range group {
		u.done <- results[i]
	}
}

// commitAlone runs one function in a transaction of its own.
func (b *badgerStore) commitAlone(fn func(store.Tx) error) error {
	start := time.Now()
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	if err := runUpdate(fn, &badgerTx{txn: txn, TxState: rules.TxState{Write: true}}); err != nil {
		return err
	}
	var err error
	if cerr := txn.Commit(); cerr != nil {
		err = fmt.Errorf("store: failed to commit: %w", cerr)
	}
	b.observe(1, time.Since(start), err)
	return err
}

// runUpdate calls fn, turning a panic into a panicked error for the caller to re-raise, and
// ends the Tx's life when fn returns.
func runUpdate(fn func(store.Tx) error, tx *badgerTx) (err error) {
	defer func() {
		tx.Done = true
		if v := recover(); v != nil {
			err = panicked{v}
		}
	}()
	return fn(tx)
}

// Close closes Badger, which writes its memtables out as tables. When that cannot succeed
// it leaves Badger open and returns [ErrNotClosed] with what was not written out: Badger
// would otherwise retry forever on a directory that is gone or read-only, or die of SIGBUS
// on a volume without room. Every acknowledged write is also in Badger's write-ahead log,
// which the next open replays, unless the directory itself is gone.
func (b *badgerStore) Close() error {
	b.closing.Lock()
	if b.closed.Swap(true) {
		b.closing.Unlock()
		return nil
	}
	close(b.updates)
	b.closing.Unlock()
	<-b.stopped
	close(b.stopCompact)
	<-b.compacted
	close(b.unwatch)
	<-b.unwatched
	disk := b.guard.refresh(0)
	switch disk.state {
	case store.HealthGone:
		return fmt.Errorf("%w: %s; the writes Badger held in memory went with it", ErrNotClosed, disk.detail)
	case store.HealthReadOnly:
		return fmt.Errorf("%w: %s; Badger's memtables were not written out as tables, and its write-ahead log, which holds every acknowledged write, is replayed at the next start", ErrNotClosed, disk.detail)
	}
	if need := b.roomNeeded(); disk.free < need {
		return fmt.Errorf("%w: %s free on the volume, %s needed to write out Badger's memtables; its write-ahead log, which holds every acknowledged write, is replayed at the next start", ErrNotClosed, mib(disk.free), mib(need))
	}
	return b.db.Close()
}

// Maintain runs Badger's value-log garbage collection until a pass finds no file worth
// rewriting.
func (b *badgerStore) Maintain(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.closed.Load() {
			return store.ErrClosed
		}
		// Garbage collection rewrites value-log files: not on a volume short of room.
		if b.guard.cur.Load().state != store.HealthOK {
			return nil
		}
		err := b.db.RunValueLogGC(gcDiscardRatio)
		switch {
		case err == nil:
			continue
		case errors.Is(err, dgbadger.ErrNoRewrite), errors.Is(err, dgbadger.ErrRejected):
			// Nothing left to reclaim, or another collection is already running.
			return nil
		default:
			return fmt.Errorf("store: value-log garbage collection: %w", err)
		}
	}
}
