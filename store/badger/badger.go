// Package badger is the store on an embedded Badger database in one directory: durable
// on one machine, for one process at a time, with nothing to run beside the daemon. Open
// returns a [store.Store] that commits Updates in groups, one disk sync a group, watches its
// disk and refuses writes before the volume is too full to take them, and reclaims space in
// Maintain.
//
// It is not for several daemons at once (the directory is locked by the first; use
// store/postgres), not for data that must outlive the machine without a backup of the
// directory, and it keeps no consumed login challenges ([store.ErrChallengesNotKept]).
package badger

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/store"
)

// Badger key layout. Every key is ASCII: a one-letter kind, '/', then the record's key. Keys
// and hashes are lowercase hex, so key order is byte order of the raw values and an Each
// visits records in that order. Node records, which a start-up reads by the million, have a
// compact binary form (package store/internal/nodecodec); the other records are the JSON of the Go types. Index
// entries are separate keys, so each lookup is one Get or one prefix scan, and a record and
// its index entries change in the same transaction.
//
//	m/version                     "2"; Open refuses any other value
//	n/<node key>                  Node, binary
//	g/<node key>                  last_seen of the node's latest flushed heartbeat, unix
//	                              nanoseconds as 8 bytes big-endian (nodes.go)
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
//	c/<counter key>               store.Counter
//	r/<hex operator did>/<hex id> Revocation
//	m/revocations                 the number of r/ records, decimal
//	p/<hex did body>              store.OperatorPin (pins.go)
//	l/<16-hex index>              a transparency log entry and the hashes it added (translog.go)
//	m/log-size                    the number of log entries, decimal
//	m/log-seed                    the seed of the log's signing key, 32 bytes
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
	pSeen      = "g/"
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
	// pOpSessions holds, per operator, one record of its bearer sessions' token hashes (32
	// bytes each), read and written whole. A key per session would leave a deleted key behind
	// at every login past the operator's quota, and Badger's scan of the operator's keys
	// walks every such key until compaction: a login would cost more with each one before it.
	pOpSessions = "v/"
	// pOldOpSessions is where an older build kept a key per session (u/<did>/<hash>), and
	// kOpIndexed the mark it set; kOpListed marks a database whose sessions are all in their
	// operator's v/ record (listOperatorSessions).
	pOldOpSessions = "u/did:"
	kOpIndexed     = "m/opsession-index"
	kOpListed      = "m/opsession-list"
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

// Option configures [Open].
type Option func(*config)

type config struct {
	logger  *slog.Logger
	reserve DiskReserve
	commit  func(updates int, took time.Duration, err error)
}

// WithCommitObserver calls fn after every commit with the number of Update functions the
// commit carried (the group's size), how long running them, committing and syncing took,
// and the commit's error. fn runs on the commit goroutine, so it must be quick.
func WithCommitObserver(fn func(updates int, took time.Duration, err error)) Option {
	return func(c *config) { c.commit = fn }
}

// WithLogger sends Badger's own messages to l, with component=badger: errors and warnings
// at their level, at most a few a minute (a failing flush retries every second, and would
// otherwise fill the log), and the rest at [LevelTrace], since Badger reports every
// compaction and file replay. The store's own changes of state (writes refused, writes
// resumed) go to l once each. Without it nothing is logged. Badger's messages name files
// and keys; the store's keys hold hashes and DIDs, never a secret.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithDiskReserve sets the free space kept on the store's volume (see [DiskReserve]).
func WithDiskReserve(r DiskReserve) Option {
	return func(c *config) { c.reserve = r }
}

// Open opens, or creates, a Badger database in dir. A nil return from Update means
// the writes are on disk (Badger's SyncWrites), so they survive a crash of the process or
// of the machine. Update functions run one at a time, in the order they arrive, and
// normally once; Views run concurrently with each other and with the Updates, each on a
// snapshot. The database belongs to one process at a time; a second Open of the same
// dir fails while the first is open. Maintain runs Badger's value-log garbage collection.
//
// Updates are committed in groups: the functions that queue up while one group is being
// written share the next transaction and its one disk sync, each with its own undo log so
// that a function that fails leaves nothing behind while the others in its group commit.
// Under load this turns one sync per write into one sync per group.
//
// The store watches its disk (see [store.Health]): it refuses writes with
// [store.ErrUnavailable] while the volume's free space is below the reserve
// ([WithDiskReserve]) or below what Badger needs to write out what it holds, and once the
// directory is removed, replaced or can no longer take new files. Badger writes its files through memory maps of sparse files, and
// a page that finds no room on a full volume kills the process with SIGBUS; no Badger
// option preallocates them or writes them otherwise, so the reserve is what keeps Badger's
// writes off a volume that cannot hold them. Open fails with [ErrNoSpace],
// [ErrReadOnly], [ErrLocked] or [ErrNotDataDir] on a directory it cannot open safely.
func Open(dir string, opts ...Option) (s store.Store, err error) {
	if dir == "" {
		return nil, errors.New("store: empty Badger directory")
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	id, total, err := preflight(dir)
	if err != nil {
		return nil, err
	}
	bo := dgbadger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithLogger(nil).
		WithMetricsEnabled(false). // metrics are process-wide expvars
		WithMemTableSize(badgerMemTableSize).
		WithNumMemtables(badgerNumMemtables).
		WithBlockCacheSize(badgerBlockCacheSize).
		WithValueLogFileSize(badgerValueLogFileSize).
		WithNumLevelZeroTables(badgerL0Tables).
		WithNumLevelZeroTablesStall(badgerL0TablesStall).
		// The store compacts on demand (compact.go) instead of by polling.
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
	if err := listOperatorSessions(db); err != nil {
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
func openBadgerDB(bo dgbadger.Options) (db *dgbadger.DB, err error) {
	defer func() {
		if v := recover(); v != nil {
			db, err = nil, fmt.Errorf("badger panicked while opening: %v", v)
		}
	}()
	return dgbadger.Open(bo)
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
		if b.guard.cur.Load().state != store.HealthGone {
			b.guard.needed.Store(b.roomNeeded())
		}
		b.guard.refresh(0)
	}
}

// Health implements [store.HealthReporter].
func (b *badgerStore) Health() store.Health { return b.guard.health() }

// CheckWrite implements [store.HealthReporter], on a look at the disk at most touchCheckAge old.
func (b *badgerStore) CheckWrite() error {
	return b.guard.allow(b.guard.refresh(touchCheckAge), false)
}

func checkVersion(db *dgbadger.DB) error {
	return db.Update(func(txn *dgbadger.Txn) error {
		item, err := txn.Get([]byte(pVersion))
		if errors.Is(err, dgbadger.ErrKeyNotFound) {
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

// listOperatorSessions writes, for a database of an older build, every operator's v/ record
// from its bearer sessions, and deletes the older build's u/ entries, in transactions of a
// bounded size; then it marks the database.
func listOperatorSessions(db *dgbadger.DB) error {
	if err := db.View(func(txn *dgbadger.Txn) error {
		_, err := txn.Get([]byte(kOpListed))
		return err
	}); err == nil {
		return nil
	} else if !errors.Is(err, dgbadger.ErrKeyNotFound) {
		return fmt.Errorf("store: failed to read the session list mark: %w", err)
	}
	lists := map[string][]byte{}
	var old [][]byte
	err := db.View(func(txn *dgbadger.Txn) error {
		opts := dgbadger.DefaultIteratorOptions
		opts.Prefix = []byte(pOpSession)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			h, ok := decodeKey(it.Item().Key()[len(pOpSession):])
			if !ok {
				return errors.New("store: corrupt bearer session key")
			}
			var s authn.BearerSession
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &s) }); err != nil {
				return fmt.Errorf("store: failed to read a bearer session: %w", err)
			}
			// The scan is in key order, and so each list in byte order, as indexes keep it.
			lists[s.OperatorDID] = append(lists[s.OperatorDID], h[:]...)
		}
		keys := txn.NewIterator(dgbadger.IteratorOptions{Prefix: []byte(pOldOpSessions)})
		defer keys.Close()
		for keys.Rewind(); keys.Valid(); keys.Next() {
			old = append(old, keys.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return err
	}
	writes := make([]func(*dgbadger.Txn) error, 0, len(lists)+len(old)+2)
	for did, hashes := range lists {
		writes = append(writes, func(txn *dgbadger.Txn) error { return txn.Set(key(pOpSessions, did), hashes) })
	}
	for _, k := range old {
		writes = append(writes, func(txn *dgbadger.Txn) error { return txn.Delete(k) })
	}
	writes = append(writes,
		func(txn *dgbadger.Txn) error { return txn.Delete([]byte(kOpIndexed)) },
		func(txn *dgbadger.Txn) error { return txn.Set([]byte(kOpListed), []byte("1")) })
	for chunk := range slices.Chunk(writes, 1000) {
		if err := db.Update(func(txn *dgbadger.Txn) error {
			for _, w := range chunk {
				if err := w(txn); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("store: failed to list bearer sessions by operator: %w", err)
		}
	}
	return nil
}
