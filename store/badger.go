package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// Badger key layout. Every key is ASCII: a one-letter kind, '/', then the record's key. Keys
// and hashes are lowercase hex, so key order is byte order of the raw values and an Each
// visits records in that order. Node records, which a start-up reads by the million, have a
// compact binary form (nodecodec.go); the other records are the JSON of the Go types. Index
// entries are separate keys, so each lookup is one Get or one prefix scan, and a record and
// its index entries change in the same transaction.
//
//	m/version                     "2"; OpenBadger refuses any other value
//	n/<node key>                  Node, binary
//	d/<did>                       node key (hex) registered under exactly this DID string
//	s/<short body>/<node key>     empty; every key with a record, by ShortBody
//	b/<session id>                binding.BindingSession
//	h/<secret hash>               session id whose CodeHash or TokenHash this is
//	k/<node key>/<session id>     empty; the sessions of a node key not stored as terminal
//	u/<sha256 of session id>      empty; the id of a deleted session, reserved forever
//	a/<node key>                  binding.Binding, the active binding of the node key
//	o/<operator did>/<node key>   empty; the active bindings of an operator
//	t/<token hash>                authn.BearerSession
//	u/<operator did>/<token hash> empty; the bearer sessions of an operator
//	m/opsession-index             "1" once every t/ record has its u/ entry
//	c/<counter key>               binding.Counter
//	r/<hex operator did>/<hex id> Revocation
//	m/revocations                 the number of r/ records, decimal
//
// Where a variable-length string is followed by a fixed-length one (s/, o/), a scan checks
// that what follows the prefix is exactly one 64-hex key, so that a DID containing '/' can
// not reach another DID's entries. The values depend on the JSON encoding of the types in
// packages binding, authn, didkey and canonical: changing a json tag or a marshaller there
// changes this format and needs a new version.
const (
	schemaVersion = "2"

	pVersion   = "m/version"
	pNode      = "n/"
	pDID       = "d/"
	pBody      = "s/"
	pSession   = "b/"
	pSecret    = "h/"
	pByNode    = "k/"
	pUsedID    = "u/"
	pBinding   = "a/"
	pOperator  = "o/"
	pOpSession = "t/"
	pCounter   = "c/"
	pRevoked   = "r/"
	pOpByOp    = "u/"
	// kOpIndexed marks a database whose bearer sessions all have their u/ entries: one
	// written before the index existed gets them at open (indexOperatorSessions).
	kOpIndexed = "m/opsession-index"
	// kRevokedCount holds the number of revocations, kept with each new one, so that the
	// bound on the list is one Get rather than a scan of it.
	kRevokedCount = "m/revocations"
)

// Badger settings. The registry's data is small (a record is well under a kilobyte, and
// there are as many records as nodes and sessions), so Badger's defaults, sized for large
// databases (64 MiB memtables, a 256 MiB block cache, 1 GiB value-log files), would only
// cost memory and disk.
const (
	badgerMemTableSize     = 16 << 20
	badgerNumMemtables     = 2
	badgerBlockCacheSize   = 16 << 20
	badgerValueLogFileSize = 64 << 20
	// gcDiscardRatio is the share of a value-log file that must be stale before Maintain
	// rewrites it; Badger's documentation suggests 0.5.
	gcDiscardRatio = 0.5
)

// BadgerOption configures [OpenBadger].
type BadgerOption func(*badgerConfig)

type badgerConfig struct {
	logger  *slog.Logger
	reserve DiskReserve
	commit  func(updates int, took time.Duration, err error)
}

// WithBadgerCommitObserver calls fn after every commit with the number of Update functions the
// commit carried (the group's size), how long running them, committing and syncing took,
// and the commit's error. fn runs on the commit goroutine, so it must be quick.
func WithBadgerCommitObserver(fn func(updates int, took time.Duration, err error)) BadgerOption {
	return func(c *badgerConfig) { c.commit = fn }
}

// WithBadgerLogger sends Badger's own messages to l, with component=badger: errors and warnings
// at their level, at most a few a minute (a failing flush retries every second, and would
// otherwise fill the log), and the rest at [LevelTrace], since Badger reports every
// compaction and file replay. The store's own changes of state (writes refused, writes
// resumed) go to l once each. Without it nothing is logged. Badger's messages name files
// and keys; the store's keys hold hashes and DIDs, never a secret.
func WithBadgerLogger(l *slog.Logger) BadgerOption {
	return func(c *badgerConfig) { c.logger = l }
}

// WithBadgerDiskReserve sets the free space kept on the store's volume (see [DiskReserve]).
func WithBadgerDiskReserve(r DiskReserve) BadgerOption {
	return func(c *badgerConfig) { c.reserve = r }
}

// OpenBadger opens, or creates, a Badger database in dir. A nil return from Update means
// the writes are on disk (Badger's SyncWrites), so they survive a crash of the process or
// of the machine. Update functions run one at a time, in the order they arrive, and
// normally once; Views run concurrently with each other and with the Updates, each on a
// snapshot. The database belongs to one process at a time; a second OpenBadger of the same
// dir fails while the first is open. The returned store implements [Maintainer].
//
// Updates are committed in groups: the functions that queue up while one group is being
// written share the next transaction and its one disk sync, each with its own undo log so
// that a function that fails leaves nothing behind while the others in its group commit.
// Under load this turns one sync per write into one sync per group.
//
// The store watches its disk (see [Health]): it refuses writes with [ErrUnavailable] while
// the volume's free space is below the reserve ([WithBadgerDiskReserve]) or below what Badger
// needs to write out what it holds, and once the directory is removed, replaced or can no
// longer take new files. Badger writes its files through memory maps of sparse files, and
// a page that finds no room on a full volume kills the process with SIGBUS; no Badger
// option preallocates them or writes them otherwise, so the reserve is what keeps Badger's
// writes off a volume that cannot hold them. OpenBadger fails with [ErrNoSpace],
// [ErrReadOnly], [ErrLocked] or [ErrNotDataDir] on a directory it cannot open safely.
func OpenBadger(dir string, opts ...BadgerOption) (s Store, err error) {
	if dir == "" {
		return nil, errors.New("store: empty Badger directory")
	}
	var cfg badgerConfig
	for _, o := range opts {
		o(&cfg)
	}
	id, total, err := preflight(dir)
	if err != nil {
		return nil, err
	}
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(nil).
		WithMetricsEnabled(false). // metrics are process-wide expvars
		WithMemTableSize(badgerMemTableSize).
		WithNumMemtables(badgerNumMemtables).
		WithBlockCacheSize(badgerBlockCacheSize).
		WithValueLogFileSize(badgerValueLogFileSize).
		WithNumLevelZeroTables(badgerL0Tables).
		WithNumLevelZeroTablesStall(badgerL0TablesStall).
		// The store compacts on demand (badger_compact.go) instead of by polling.
		WithNumCompactors(0).
		// A restart reads every node record; compacting level 0 at close hands it a settled
		// tree instead of a stack of overlapping tables to merge.
		WithCompactL0OnClose(true)
	if cfg.logger != nil {
		bo = bo.WithLogger(newSlogBadger(cfg.logger.With("component", "badger")))
	}
	db, err := openBadgerDB(bo)
	if err != nil {
		switch {
		case isLocked(err):
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		case isNoSpace(err):
			return nil, fmt.Errorf("%s: %w: %v", dir, ErrNoSpace, err)
		case isReadOnly(err):
			return nil, fmt.Errorf("%s: %w: %v", dir, ErrReadOnly, err)
		}
		return nil, fmt.Errorf("store: failed to open Badger database: %w", err)
	}
	if err := checkVersion(db); err != nil {
		db.Close()
		return nil, err
	}
	if err := indexOperatorSessions(db); err != nil {
		db.Close()
		return nil, err
	}
	var log *slog.Logger
	if cfg.logger != nil {
		log = cfg.logger.With("component", "store")
	}
	b := &badgerStore{
		db: db, updates: make(chan *pendingUpdate, updateQueue), stopped: make(chan struct{}),
		wake: make(chan struct{}, 1), stopCompact: make(chan struct{}), compacted: make(chan struct{}),
		guard: newDiskGuard(dir, id, cfg.reserve.resolve(total), log), dir: dir,
		unwatch: make(chan struct{}), unwatched: make(chan struct{}),
		observe: cfg.commit,
	}
	if b.observe == nil {
		b.observe = func(int, time.Duration, error) {}
	}
	b.guard.needed.Store(b.roomNeeded())
	b.guard.refresh(0)
	go b.commitLoop()
	go b.compactLoop(cfg.logger)
	b.wakeCompactor() // level 0 may hold what the last run left
	go b.watch()
	return b, nil
}

// openBadgerDB opens Badger, turning a panic in it into an error: a start-up on a damaged
// directory ends with one line, not a trace.
func openBadgerDB(bo badger.Options) (db *badger.DB, err error) {
	defer func() {
		if v := recover(); v != nil {
			db, err = nil, fmt.Errorf("badger panicked while opening: %v", v)
		}
	}()
	return badger.Open(bo)
}

// roomNeeded is the free space Badger needs to write out what it holds in memory and to
// compact the tree: twice the write-ahead logs (the flush, then the level-0 compaction that
// rewrites it, which Close also forces), the whole tree (the compactor flattens it level by
// level, and a step writes its levels anew before it deletes them), and a margin for the
// manifest and new logs.
func (b *badgerStore) roomNeeded() uint64 {
	var tree int64
	for _, l := range b.db.Levels() {
		tree += max(l.Size, 0)
	}
	return 2*memFilesAllocated(b.dir) + uint64(tree) + openRoom
}

// watch looks at the disk every diskCheckEvery until Close, so that a fault is noticed and
// logged on an idle registry too.
func (b *badgerStore) watch() {
	defer close(b.unwatched)
	t := time.NewTicker(diskCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-b.unwatch:
			return
		case <-t.C:
		}
		if b.guard.cur.Load().state != HealthGone {
			b.guard.needed.Store(b.roomNeeded())
		}
		b.guard.refresh(0)
	}
}

// Health implements [HealthReporter].
func (b *badgerStore) Health() Health { return b.guard.health() }

func (b *badgerStore) checkWrite() error {
	return b.guard.allow(b.guard.refresh(touchCheckAge), false)
}

func checkVersion(db *badger.DB) error {
	return db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(pVersion))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set([]byte(pVersion), []byte(schemaVersion))
		}
		if err != nil {
			return fmt.Errorf("store: failed to read the schema version: %w", err)
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("store: failed to read the schema version: %w", err)
		}
		if string(v) != schemaVersion {
			return fmt.Errorf("store: database has schema version %q, this build reads %q", v, schemaVersion)
		}
		return nil
	})
}

// indexOperatorSessions gives every bearer session of a database written before the u/
// index existed its entry, in transactions of a bounded size, then marks the database.
func indexOperatorSessions(db *badger.DB) error {
	if err := db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(kOpIndexed))
		return err
	}); err == nil {
		return nil
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("store: failed to read the session index mark: %w", err)
	}
	var entries [][]byte
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(pOpSession)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			h := it.Item().Key()[len(pOpSession):]
			var s authn.BearerSession
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &s) }); err != nil {
				return fmt.Errorf("store: failed to read a bearer session: %w", err)
			}
			entries = append(entries, key(pOpByOp, s.OperatorDID, string(h)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	const chunk = 1000
	for len(entries) > 0 {
		n := min(chunk, len(entries))
		if err := db.Update(func(txn *badger.Txn) error {
			for _, k := range entries[:n] {
				if err := txn.Set(k, nil); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("store: failed to index bearer sessions: %w", err)
		}
		entries = entries[n:]
	}
	return db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(kOpIndexed), []byte("1")) })
}

// LevelTrace is the level of Badger's informational and debug messages: below debug, so
// that svrpd's --log-level debug shows requests without Badger's compactions.
const LevelTrace = slog.LevelDebug - 4

// Badger's errors and warnings pass at badgerBurst lines at once and then one per
// badgerEvery: a flush that fails and retries every second writes four lines a minute, not
// sixty, and the lines it could not write are counted on the next.
const (
	badgerBurst = 5
	badgerEvery = 15 * time.Second
)

type slogBadger struct {
	l *slog.Logger

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

func newSlogBadger(l *slog.Logger) *slogBadger {
	return &slogBadger{l: l, tokens: badgerBurst, last: time.Now()}
}

// admit takes a token for one line, or counts the line as suppressed. It returns how many
// lines were suppressed since the last one admitted.
func (s *slogBadger) admit(now time.Time) (ok bool, suppressed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = min(badgerBurst, s.tokens+now.Sub(s.last).Seconds()/badgerEvery.Seconds())
	s.last = now
	if s.tokens < 1 {
		s.suppressed++
		return false, 0
	}
	s.tokens--
	n := s.suppressed
	s.suppressed = 0
	return true, n
}

func (s *slogBadger) log(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if level < slog.LevelWarn {
		s.l.Log(ctx, level, msg)
		return
	}
	ok, n := s.admit(time.Now())
	switch {
	case !ok:
	case n > 0:
		s.l.Log(ctx, level, msg, "suppressed", n)
	default:
		s.l.Log(ctx, level, msg)
	}
}

func (s *slogBadger) Errorf(f string, a ...any)   { s.log(slog.LevelError, f, a) }
func (s *slogBadger) Warningf(f string, a ...any) { s.log(slog.LevelWarn, f, a) }
func (s *slogBadger) Infof(f string, a ...any)    { s.log(LevelTrace, f, a) }
func (s *slogBadger) Debugf(f string, a ...any)   { s.log(LevelTrace, f, a) }

type badgerStore struct {
	db     *badger.DB
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
	// The on-demand compactor (badger_compact.go): commits send on wake; Close closes
	// stopCompact and waits for compacted.
	wake        chan struct{}
	stopCompact chan struct{}
	compacted   chan struct{}

	dir       string
	guard     *diskGuard
	unwatch   chan struct{}
	unwatched chan struct{}

	// observe is WithBadgerCommitObserver's function, or a no-op.
	observe func(updates int, took time.Duration, err error)
}

// pendingUpdate is one Update waiting for its function to run and its group to commit.
type pendingUpdate struct {
	fn      func(Tx) error
	done    chan error
	reserve bool // it makes acknowledged state durable and may use the reserve
	noUndo  bool // it keeps no undo log in a shared transaction (withoutUndo)
}

// noUndoKey marks an Update whose writes keep no undo log when it shares a transaction:
// should it fail, every function of its group is given a transaction of its own instead, as
// when an undo fails. An undo log reads each key before its first write; a flush of touches,
// which fails only when the store does, so writes each record without reading it.
type noUndoKey struct{}

func withoutUndo(ctx context.Context) context.Context {
	return context.WithValue(ctx, noUndoKey{}, true)
}

const (
	// maxGroup bounds how many Update functions share one transaction, which keeps a group
	// well under Badger's transaction size limit for the store's small records.
	maxGroup = 64
	// updateQueue is how many Updates may wait while a group is written.
	updateQueue = 1024
	// gatherWindow is how long a group waits for more writers once writers have been
	// coming together; measured on svrpd bench's login scenario it takes logins from about
	// 7,500 to 12,000 a second on two cores, and lowers their median latency.
	gatherWindow = 200 * time.Microsecond
)

// panicked carries a panic out of an Update function to the goroutine that called Update.
type panicked struct{ value any }

func (p panicked) Error() string { return "store: update function panicked" }

var (
	_ Store      = (*badgerStore)(nil)
	_ Maintainer = (*badgerStore)(nil)
)

func (b *badgerStore) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return badgerUnavailable(errClosed)
	}
	// The transaction begins at the first read: a View whose reads are all served by the
	// node cache in front (a heartbeat's lookup) costs Badger nothing.
	tx := &badgerTx{db: b.db}
	defer func() {
		tx.done = true
		if tx.txn != nil {
			tx.txn.Discard()
		}
	}()
	return badgerUnavailable(fn(tx))
}

// badgerUnavailable turns the refusals of a store closed or closing into [ErrUnavailable]: a
// request that a shutdown catches is told to come back, as one the disk refuses is.
func badgerUnavailable(err error) error {
	if errors.Is(err, errClosed) || errors.Is(err, badger.ErrDBClosed) || errors.Is(err, badger.ErrBlockedWrites) {
		return Unavailable(err)
	}
	return err
}

func (b *badgerStore) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	noUndo, _ := ctx.Value(noUndoKey{}).(bool)
	u := &pendingUpdate{fn: fn, done: make(chan error, 1), reserve: mayUseReserve(ctx), noUndo: noUndo}
	b.closing.RLock()
	if b.closed.Load() {
		b.closing.RUnlock()
		return badgerUnavailable(errClosed)
	}
	b.updates <- u
	b.closing.RUnlock()
	err := <-u.done
	if p, ok := err.(panicked); ok {
		panic(p.value)
	}
	return badgerUnavailable(err)
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
		// for one update as for sixty-four, and waiting 200 µs to share it is cheaper than
		// a sync of one's own. A lone writer never waits.
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
		tx := &badgerTx{txn: txn, txState: txState{write: true}, undo: map[string]undoEntry{}}
		if u.noUndo {
			tx.undo = nil
		}
		err := runUpdate(u.fn, tx)
		if err == nil {
			kept = append(kept, i)
			continue
		}
		if rerr := tx.rollback(); rerr != nil || u.noUndo || errors.Is(err, badger.ErrTxnTooBig) {
			// The shared transaction can no longer be trusted, or is full: give every
			// function of the group a transaction of its own. The Store contract allows a
			// function to run more than once.
			txn.Discard()
			for _, u := range group {
				err := b.commitAlone(u.fn)
				if err == nil && !b.guard.sameDir() {
					b.guard.refresh(0)
					err = ErrUnavailable
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
			err = ErrUnavailable
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
func (b *badgerStore) commitAlone(fn func(Tx) error) error {
	start := time.Now()
	txn := b.db.NewTransaction(true)
	defer txn.Discard()
	if err := runUpdate(fn, &badgerTx{txn: txn, txState: txState{write: true}}); err != nil {
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
func runUpdate(fn func(Tx) error, tx *badgerTx) (err error) {
	defer func() {
		tx.done = true
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
	case HealthGone:
		return fmt.Errorf("%w: %s; the writes Badger held in memory went with it", ErrNotClosed, disk.detail)
	case HealthReadOnly:
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
			return errClosed
		}
		// Garbage collection rewrites value-log files: not on a volume short of room.
		if b.guard.cur.Load().state != HealthOK {
			return nil
		}
		err := b.db.RunValueLogGC(gcDiscardRatio)
		switch {
		case err == nil:
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			// Nothing left to reclaim, or another collection is already running.
			return nil
		default:
			return fmt.Errorf("store: value-log garbage collection: %w", err)
		}
	}
}

type badgerTx struct {
	txn *badger.Txn
	db  *badger.DB // a View's: txn is begun from it at the first read
	txState
	// undo holds, for each key this Tx wrote, what the shared transaction held before, so
	// that a failing function of a group can be taken back alone. Nil when the Tx has the
	// transaction to itself.
	undo map[string]undoEntry
}

// undoEntry is a key's state before a function wrote it.
type undoEntry struct {
	old     []byte
	existed bool
}

// remember records k's state before its first write by this Tx.
func (t *badgerTx) remember(k []byte) error {
	if t.undo == nil {
		return nil
	}
	if _, seen := t.undo[string(k)]; seen {
		return nil
	}
	old, err := t.getRaw(k)
	switch {
	case err == nil:
		t.undo[string(k)] = undoEntry{old: old, existed: true}
	case errors.Is(err, ErrNotFound):
		t.undo[string(k)] = undoEntry{}
	default:
		return err
	}
	return nil
}

// rollback restores every key this Tx wrote to its state before the Tx.
func (t *badgerTx) rollback() error {
	for k, e := range t.undo {
		var err error
		if e.existed {
			err = t.txn.Set([]byte(k), e.old)
		} else {
			err = t.txn.Delete([]byte(k))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var _ Tx = (*badgerTx)(nil)

func key(prefix string, parts ...string) []byte {
	k := []byte(prefix)
	for i, p := range parts {
		if i > 0 {
			k = append(k, '/')
		}
		k = append(k, p...)
	}
	return k
}

// kind names the record kind of a key for error messages, which carry no key or value.
func kind(k []byte) string {
	switch {
	case bytes.HasPrefix(k, []byte(pNode)):
		return "node"
	case bytes.HasPrefix(k, []byte(pSession)):
		return "binding session"
	case bytes.HasPrefix(k, []byte(pBinding)):
		return "binding"
	case bytes.HasPrefix(k, []byte(pOpSession)):
		return "bearer session"
	case bytes.HasPrefix(k, []byte(pCounter)):
		return "counter"
	case bytes.HasPrefix(k, []byte(pRevoked)):
		return "revocation"
	}
	return "index"
}

// reader returns the transaction reads go through, beginning a View's at its first read.
func (t *badgerTx) reader() (*badger.Txn, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	if t.txn == nil {
		if t.db.IsClosed() {
			return nil, errClosed
		}
		t.txn = t.db.NewTransaction(false)
	}
	return t.txn, nil
}

func (t *badgerTx) getRaw(k []byte) ([]byte, error) {
	txn, err := t.reader()
	if err != nil {
		return nil, err
	}
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: failed to read %s: %w", kind(k), err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("store: failed to read %s: %w", kind(k), err)
	}
	return v, nil
}

func (t *badgerTx) get(k []byte, v any) error {
	raw, err := t.getRaw(k)
	if err != nil {
		return err
	}
	return decode(k, raw, v)
}

func decode(k, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("store: failed to decode %s: %w", kind(k), err)
	}
	return nil
}

func (t *badgerTx) setRaw(k, v []byte) error {
	if err := t.remember(k); err != nil {
		return err
	}
	if err := t.txn.Set(k, v); err != nil {
		return fmt.Errorf("store: failed to write %s: %w", kind(k), err)
	}
	return nil
}

func (t *badgerTx) put(k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: failed to encode %s: %w", kind(k), err)
	}
	return t.setRaw(k, raw)
}

func (t *badgerTx) del(k []byte) error {
	if err := t.remember(k); err != nil {
		return err
	}
	if err := t.txn.Delete(k); err != nil {
		return fmt.Errorf("store: failed to delete %s: %w", kind(k), err)
	}
	return nil
}

// scan calls fn with the part of each key after prefix and, unless keysOnly, the value, in
// key order. Both are valid only during the call. Writes are refused meanwhile, as the Tx
// contract asks of Each functions.
func (t *badgerTx) scan(prefix []byte, keysOnly bool, fn func(rest, val []byte) error) error {
	if err := t.readable(); err != nil {
		return err
	}
	t.iterating++
	defer func() { t.iterating-- }()
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = !keysOnly
	txn, err := t.reader()
	if err != nil {
		return err
	}
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		// Badger's own buffers, valid until the next item: every caller decodes or copies
		// what it keeps, and a start-up scan of a million nodes saves two copies a record.
		item := it.Item()
		k := item.Key()
		if keysOnly {
			if err := fn(k[len(prefix):], nil); err != nil {
				return err
			}
			continue
		}
		var ferr error
		if err := item.Value(func(v []byte) error {
			ferr = fn(k[len(prefix):], v)
			return nil
		}); err != nil {
			return fmt.Errorf("store: failed to read %s: %w", kind(k), err)
		}
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// decodeKey parses a hex node key or hash from a key or an index value; ok is false for
// anything else, which a scan then skips as not its own.
func decodeKey(s []byte) (k [32]byte, ok bool) {
	if len(s) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], s); err != nil {
		return k, false
	}
	return k, true
}

func (t *badgerTx) Node(k didkey.PublicKey) (Node, error) {
	if err := t.readable(); err != nil {
		return Node{}, err
	}
	return t.getNode(key(pNode, k.Hex()))
}

// getNode reads a node record in its binary form (nodecodec.go).
func (t *badgerTx) getNode(k []byte) (Node, error) {
	raw, err := t.getRaw(k)
	if err != nil {
		return Node{}, err
	}
	n, err := decodeNode(raw)
	if err != nil {
		return Node{}, fmt.Errorf("store: failed to decode %s: %w", kind(k), err)
	}
	return n, nil
}

// writeTouched implements touchWriter: one write, no read.
func (t *badgerTx) writeTouched(n Node) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.setRaw(key(pNode, n.Key.Hex()), appendNode(nil, n))
}

func (t *badgerTx) PutNode(n Node) error {
	if err := t.writable(); err != nil {
		return err
	}
	old, err := t.getNode(key(pNode, n.Key.Hex()))
	had := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if !had || old.DID != n.DID {
		if had && old.DID != "" {
			owner, err := t.getRaw(key(pDID, old.DID))
			switch {
			case err == nil && string(owner) == n.Key.Hex():
				if err := t.del(key(pDID, old.DID)); err != nil {
					return err
				}
			case err != nil && !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if n.DID != "" {
			if err := t.setRaw(key(pDID, n.DID), []byte(n.Key.Hex())); err != nil {
				return err
			}
		}
	}
	if !had {
		if err := t.setRaw(key(pBody, n.Key.ShortBody(), n.Key.Hex()), nil); err != nil {
			return err
		}
	}
	return t.setRaw(key(pNode, n.Key.Hex()), appendNode(nil, n))
}

func (t *badgerTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	if err := t.readable(); err != nil {
		return didkey.PublicKey{}, err
	}
	raw, err := t.getRaw(key(pDID, did))
	if err != nil {
		return didkey.PublicKey{}, err
	}
	k, ok := decodeKey(raw)
	if !ok {
		return didkey.PublicKey{}, errors.New("store: corrupt DID index entry")
	}
	return k, nil
}

func (t *badgerTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	var keys []didkey.PublicKey
	err := t.scan(key(pBody, body, ""), true, func(rest, _ []byte) error {
		if k, ok := decodeKey(rest); ok {
			keys = append(keys, k)
		}
		return nil
	})
	return keys, err
}

func (t *badgerTx) EachNode(fn func(Node) error) error {
	p := []byte(pNode)
	return t.scan(p, false, func(_, v []byte) error {
		n, err := decodeNode(v)
		if err != nil {
			return fmt.Errorf("store: failed to decode %s: %w", kind(p), err)
		}
		return fn(n)
	})
}

func (t *badgerTx) NodeCount() (int, error) {
	n := 0
	err := t.scan([]byte(pNode), true, func(_, _ []byte) error {
		n++
		return nil
	})
	return n, err
}

func (t *badgerTx) BindingSession(id string) (binding.BindingSession, error) {
	if err := t.readable(); err != nil {
		return binding.BindingSession{}, err
	}
	var s binding.BindingSession
	err := t.get(key(pSession, id), &s)
	return s, err
}

func (t *badgerTx) PutBindingSession(s binding.BindingSession) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := checkSession(s); err != nil {
		return err
	}
	var old binding.BindingSession
	err := t.get(key(pSession, s.ID), &old)
	had := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	newHashes := secretHashes(s)
	if had {
		for _, h := range secretHashes(old) {
			if slices.Contains(newHashes, h) {
				continue
			}
			hk := key(pSecret, hex.EncodeToString(h[:]))
			owner, err := t.getRaw(hk)
			switch {
			case err == nil && string(owner) == s.ID:
				if err := t.del(hk); err != nil {
					return err
				}
			case err != nil && !errors.Is(err, ErrNotFound):
				return err
			}
		}
		if old.NodeKey != s.NodeKey {
			if err := t.del(key(pByNode, old.NodeKey.Hex(), s.ID)); err != nil {
				return err
			}
		}
	}
	for _, h := range newHashes {
		hk := key(pSecret, hex.EncodeToString(h[:]))
		owner, err := t.getRaw(hk)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil || string(owner) != s.ID {
			if err := t.setRaw(hk, []byte(s.ID)); err != nil {
				return err
			}
		}
	}
	open := !s.State.Terminal()
	switch {
	case open && (!had || old.NodeKey != s.NodeKey || old.State.Terminal()):
		if err := t.setRaw(key(pByNode, s.NodeKey.Hex(), s.ID), nil); err != nil {
			return err
		}
	case !open && had:
		// Also when old was terminal: a store written before the index held only open
		// sessions loses a stale entry the first time the session is put again.
		if err := t.del(key(pByNode, s.NodeKey.Hex(), s.ID)); err != nil {
			return err
		}
	}
	return t.put(key(pSession, s.ID), s)
}

func (t *badgerTx) DeleteBindingSession(id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	var old binding.BindingSession
	err := t.get(key(pSession, id), &old)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, h := range secretHashes(old) {
		hk := key(pSecret, hex.EncodeToString(h[:]))
		owner, err := t.getRaw(hk)
		switch {
		case err == nil && string(owner) == id:
			if err := t.del(hk); err != nil {
				return err
			}
		case err != nil && !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if err := t.del(key(pByNode, old.NodeKey.Hex(), id)); err != nil {
		return err
	}
	if err := t.setRaw(key(pUsedID, usedIDHash(id)), nil); err != nil {
		return err
	}
	return t.del(key(pSession, id))
}

func (t *badgerTx) BindingSessionIDUsed(id string) (bool, error) {
	if err := t.readable(); err != nil {
		return false, err
	}
	for _, k := range [][]byte{key(pSession, id), key(pUsedID, usedIDHash(id))} {
		_, err := t.getRaw(k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return false, err
		}
	}
	return false, nil
}

func (t *badgerTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	if err := t.readable(); err != nil {
		return "", err
	}
	id, err := t.getRaw(key(pSecret, hex.EncodeToString(h[:])))
	return string(id), err
}

func (t *badgerTx) OpenBindingSessionsByNode(k didkey.PublicKey) ([]binding.BindingSession, error) {
	var ids []string
	if err := t.scan(key(pByNode, k.Hex(), ""), true, func(rest, _ []byte) error {
		ids = append(ids, string(rest))
		return nil
	}); err != nil {
		return nil, err
	}
	var out []binding.BindingSession
	for _, id := range ids {
		s, err := t.BindingSession(id)
		if err != nil {
			return nil, fmt.Errorf("store: session index names a missing session: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

func (t *badgerTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	p := []byte(pSession)
	return t.scan(p, false, func(_, v []byte) error {
		var s binding.BindingSession
		if err := decode(p, v, &s); err != nil {
			return err
		}
		return fn(s)
	})
}

func (t *badgerTx) Binding(node didkey.PublicKey) (binding.Binding, error) {
	if err := t.readable(); err != nil {
		return binding.Binding{}, err
	}
	var b binding.Binding
	err := t.get(key(pBinding, node.Hex()), &b)
	return b, err
}

func (t *badgerTx) PutBinding(b binding.Binding) error {
	if err := t.writable(); err != nil {
		return err
	}
	var old binding.Binding
	err := t.get(key(pBinding, b.NodeKey.Hex()), &old)
	had := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if !had || old.OperatorDID != b.OperatorDID {
		if had && old.OperatorDID != "" {
			if err := t.del(key(pOperator, old.OperatorDID, b.NodeKey.Hex())); err != nil {
				return err
			}
		}
		if b.OperatorDID != "" {
			if err := t.setRaw(key(pOperator, b.OperatorDID, b.NodeKey.Hex()), nil); err != nil {
				return err
			}
		}
	}
	return t.put(key(pBinding, b.NodeKey.Hex()), b)
}

func (t *badgerTx) BindingsByOperator(operatorDID string) ([]binding.Binding, error) {
	var keys []didkey.PublicKey
	if err := t.scan(key(pOperator, operatorDID, ""), true, func(rest, _ []byte) error {
		if k, ok := decodeKey(rest); ok {
			keys = append(keys, k)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []binding.Binding
	for _, k := range keys {
		b, err := t.Binding(k)
		if err != nil {
			return nil, fmt.Errorf("store: operator index names a missing binding: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

func (t *badgerTx) DeleteBinding(node didkey.PublicKey) error {
	if err := t.writable(); err != nil {
		return err
	}
	var old binding.Binding
	err := t.get(key(pBinding, node.Hex()), &old)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if old.OperatorDID != "" {
		if err := t.del(key(pOperator, old.OperatorDID, node.Hex())); err != nil {
			return err
		}
	}
	return t.del(key(pBinding, node.Hex()))
}

// revocationKey hex-encodes both parts: a revocation_id may hold '/', and the store does not
// rely on the registry having checked the DID.
func revocationKey(operatorDID, revocationID string) []byte {
	return key(pRevoked, hex.EncodeToString([]byte(operatorDID)), hex.EncodeToString([]byte(revocationID)))
}

func (t *badgerTx) Revocation(operatorDID, revocationID string) (Revocation, error) {
	if err := t.readable(); err != nil {
		return Revocation{}, err
	}
	var r Revocation
	err := t.get(revocationKey(operatorDID, revocationID), &r)
	return r, err
}

func (t *badgerTx) PutRevocation(r Revocation) error {
	if err := t.writable(); err != nil {
		return err
	}
	k := revocationKey(r.OperatorDID, r.RevocationID)
	if _, err := t.getRaw(k); errors.Is(err, ErrNotFound) {
		n, err := t.RevocationCount()
		if err != nil {
			return err
		}
		if err := t.setRaw([]byte(kRevokedCount), strconv.AppendInt(nil, int64(n)+1, 10)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	return t.put(k, r)
}

func (t *badgerTx) RevocationCount() (int, error) {
	if err := t.readable(); err != nil {
		return 0, err
	}
	raw, err := t.getRaw([]byte(kRevokedCount))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return 0, errors.New("store: corrupt revocation count")
	}
	return n, nil
}

func (t *badgerTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	if err := t.readable(); err != nil {
		return authn.BearerSession{}, err
	}
	var s authn.BearerSession
	err := t.get(key(pOpSession, hex.EncodeToString(tokenHash[:])), &s)
	return s, err
}

func (t *badgerTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	if err := t.writable(); err != nil {
		return err
	}
	h := hex.EncodeToString(tokenHash[:])
	var old authn.BearerSession
	if err := t.get(key(pOpSession, h), &old); err == nil && old.OperatorDID != s.OperatorDID {
		if err := t.del(key(pOpByOp, old.OperatorDID, h)); err != nil {
			return err
		}
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if err := t.setRaw(key(pOpByOp, s.OperatorDID, h), nil); err != nil {
		return err
	}
	return t.put(key(pOpSession, h), s)
}

func (t *badgerTx) DeleteBearerSession(tokenHash [32]byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	h := hex.EncodeToString(tokenHash[:])
	var old authn.BearerSession
	if err := t.get(key(pOpSession, h), &old); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := t.del(key(pOpByOp, old.OperatorDID, h)); err != nil {
		return err
	}
	return t.del(key(pOpSession, h))
}

func (t *badgerTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	var out [][32]byte
	err := t.scan(key(pOpByOp, operatorDID, ""), true, func(rest, _ []byte) error {
		// Exactly one 64-hex hash after the prefix: a DID with '/' in it cannot reach
		// another DID's entries.
		if h, ok := decodeKey(rest); ok {
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

func (t *badgerTx) EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error {
	p := []byte(pOpSession)
	return t.scan(p, false, func(rest, v []byte) error {
		h, ok := decodeKey(rest)
		if !ok {
			return errors.New("store: corrupt bearer session key")
		}
		var s authn.BearerSession
		if err := decode(p, v, &s); err != nil {
			return err
		}
		return fn(h, s)
	})
}

func (t *badgerTx) Counter(k string) (binding.Counter, error) {
	if err := t.readable(); err != nil {
		return binding.Counter{}, err
	}
	var c binding.Counter
	err := t.get(key(pCounter, k), &c)
	if errors.Is(err, ErrNotFound) {
		return binding.Counter{}, nil
	}
	return c, err
}

func (t *badgerTx) Counters(keys ...string) ([]binding.Counter, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	return counters(t, keys)
}

func (t *badgerTx) CountEvent(k string, now time.Time, window time.Duration) (binding.Counter, error) {
	if err := t.writable(); err != nil {
		return binding.Counter{}, err
	}
	return countEvent(t, k, now, window)
}

func (t *badgerTx) PutCounter(k string, c binding.Counter) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.put(key(pCounter, k), c)
}

func (t *badgerTx) DeleteCounter(k string) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.del(key(pCounter, k))
}

func (t *badgerTx) EachCounter(fn func(key string, c binding.Counter) error) error {
	p := []byte(pCounter)
	return t.scan(p, false, func(rest, v []byte) error {
		var c binding.Counter
		if err := decode(p, v, &c); err != nil {
			return err
		}
		return fn(string(rest), c)
	})
}
