// Package postgres is the store on a PostgreSQL server, shared by any number of daemons:
// they see each other's writes, consume each login challenge once between them
// (ConsumeChallenge), take turns at upkeep (Exclusive) and share secrets kept in the
// database (Secret). Its node table is followed by the node cache through a [store.NodeFeed].
//
// It is not an embedded store: the server, its backups and its replication are the
// operator's. It creates and migrates its own tables in the first schema of the
// connection's search_path and refuses a schema newer than it knows; it never drops
// anything.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svrp/svrp/store"
)

// Store is the store on a PostgreSQL server, shared by any number of daemons. Open it
// with [Open].
//
// # Schema
//
// One table per kind of record. Each row keeps the record in the encoding the Badger store
// uses (nodes in their binary form, everything else as JSON) beside the columns the lookups
// need, each with its index: nodes by DID and short body, binding sessions by node key and
// secret hash, bindings by operator. Strings that are keys are bytea, so that any byte
// string is kept and rows sort as Go compares strings. Node rows also carry what other
// daemons need to follow the table ([Store.NodeChanges]): a revision and the id of the
// transaction that last wrote the row.
//
// # Liveness
//
// A heartbeat does not write the node row. A flush of a second's heartbeats appends their
// keys and times to a log, a row per bucket of keys, which is all the other daemons read to
// follow it. Maintain folds the log into a narrow table of each node's latest heartbeat
// (key and time, indexed by key alone) every foldEvery, once its rows are touchKept old:
// one row update per node a fold, however many times it beat. A read of last_seen takes
// the later of the node's liveness row and the log's heartbeats of its key, which it finds
// in its key's bucket; the log holds foldEvery and touchKept of heartbeats, and the upkeep's
// interval more, while some daemon does its upkeep. Both tables are UNLOGGED, since a lost
// heartbeat costs freshness only: they write no WAL, are not replicated to standbys, and
// are emptied by the server's recovery from a crash. A daemon that finds them emptied (at
// Open, or at its next read of the feed) gives every node a last_seen of that moment. So after a database crash or a
// failover, clients see every node as seen at the repair, as online for one online
// window; each node's next heartbeat puts back its true time, a node that had gone quiet
// before the crash looks seen at the repair and is expired that much later, and no node is
// expired or loses its binding because its heartbeats were lost. Daemons that stayed up
// keep the last_seen they hold in memory, which never moves back.
//
// # Isolation
//
// Every Update runs SERIALIZABLE, which covers ranges scanned as well as rows read, so a
// decision taken on what a lookup did not find (no other key on a short body, a session
// cap) still holds at commit, as the store contract asks. A transaction that loses a
// conflict (40001) or a deadlock (40P01) is rolled back and its function run again, at most
// maxPostgresAttempts times, after a short random pause. Views run REPEATABLE READ READ
// ONLY: one snapshot, no locks. A transaction's BEGIN goes in one round trip with its first
// statement, and a transaction that sends no statement never begins.
type Store struct {
	// Defaults: nothing to flush, since TouchNode writes at once; nothing to refuse ahead
	// of the server.
	store.Defaults
	pool   *pgxpool.Pool
	closed atomic.Bool
	// statements counts the statements sent, for the daemon's and the load tool's figures.
	statements atomic.Uint64

	health serverHealth
}

// Bounds of the PostgreSQL store, with their reasons.
const (
	// maxPostgresAttempts bounds the runs of one Update function. Under the store suite's
	// worst case (32 writers on one row) every round commits at least one of them, so a
	// bound above that count never fails a transaction that contention alone delays.
	maxPostgresAttempts = 64
	// maxRetryPause is the longest pause before a retry; pauses are random up to a bound
	// that doubles from 1 ms, so that writers who collided do not collide again at once.
	maxRetryPause = 64 * time.Millisecond
	// pgPage is the rows an Each method reads per statement: a full-table scan never holds
	// the whole table in memory, and a page costs one round trip.
	pgPage = 1000
	// migrationLock is the advisory lock key daemons take while migrating, so that two
	// daemons starting at once do not both apply a migration.
	migrationLock = 0x73767270_0001
	// nodeDeletionKept is how long a node deletion's row stays for the other daemons' node
	// caches, which read the feed every fraction of a second: an hour covers any daemon that
	// is following at all, and keeps the table to the deletions of one hour.
	nodeDeletionKept = time.Hour
	// touchKept is how long a heartbeat flush's log rows stay unfolded for the other
	// daemons, which read them within a second. A daemon that stops reading for longer
	// misses those heartbeats, which costs freshness only until each node's next
	// heartbeat, within a minute.
	touchKept = time.Minute
	// foldEvery is how much of the flush log a fold takes in at least: with every node
	// beating once a minute, five of each node's heartbeats share one row update. A longer
	// wait makes that share smaller and the log, which a read of one node's last_seen
	// outside a daemon's memory searches in part, longer.
	foldEvery = 5 * time.Minute
)

// Open connects to the PostgreSQL server at url (a postgres:// URL or a keyword/value
// string, as libpq takes) and migrates its schema to [SchemaVersion], refusing a
// database whose schema is newer than this build knows. Tables go into the first schema of
// the connection's search_path.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors may quote the URL, password included.
		return nil, errors.New("store: the PostgreSQL URL does not parse")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	for _, o := range opts {
		o(cfg)
	}
	p := &Store{}
	cfg.ConnConfig.Tracer = statementCounter{&p.statements}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connecting to PostgreSQL: %w", err)
	}
	p.pool = pool
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := p.reseed(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

// defaultConnectTimeout bounds a connection attempt when the URL sets none
// (connect_timeout): a server whose packets are dropped is reported unavailable, not waited
// for until the request's client gives up.
const defaultConnectTimeout = 5 * time.Second

// Option configures [Open].
type Option func(*pgxpool.Config)

// WithPoolSize caps the connections the store keeps open; 0 leaves pgx's default, the
// larger of 4 and the number of CPUs.
func WithPoolSize(n int) Option {
	return func(c *pgxpool.Config) {
		if n > 0 {
			c.MaxConns = int32(min(n, math.MaxInt32))
		}
	}
}

// WithStatementTimeout has the server cancel any statement that runs longer than d
// (statement_timeout); the transaction then fails with [store.ErrUnavailable]. 0 sets no
// bound. Schema migrations run without it.
func WithStatementTimeout(d time.Duration) Option {
	return func(c *pgxpool.Config) {
		if d > 0 {
			c.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(1, d.Milliseconds()), 10)
		}
	}
}

// statementCounter counts a store's statements as pgx sends them.
type statementCounter struct{ n *atomic.Uint64 }

func (c statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts the statements of a pipeline, a transaction's BEGIN and first
// statement, as they are sent.
func (c statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	c.n.Add(uint64(data.Batch.Len()))
	return ctx
}

func (statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Statements returns the number of statements this store has sent since it was opened,
// transaction control included: what svrpd's store_statements_total reports, and what
// svrpd bench divides by the operations of a window.
func (p *Store) Statements() uint64 { return p.statements.Load() }
