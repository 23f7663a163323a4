package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
)

// Postgres is the store on a PostgreSQL server, shared by any number of daemons. Open it
// with [OpenPostgres].
//
// # Schema
//
// One table per kind of record. Each row keeps the record in the encoding the Badger store
// uses (nodes in their binary form, everything else as JSON) beside the columns the lookups
// need, each with its index: nodes by DID and short body, binding sessions by node key and
// secret hash, bindings by operator. Strings that are keys are bytea, so that any byte
// string is kept and rows sort as Go compares strings. Node rows also carry what other
// daemons need to follow the table ([Postgres.NodeChanges]): a revision, the id of the
// transaction that last wrote the row, and the latest coalesced heartbeat, kept apart from
// the record so that a batch of heartbeats is one UPDATE.
//
// # Isolation
//
// Every Update runs SERIALIZABLE, which covers ranges scanned as well as rows read, so a
// decision taken on what a lookup did not find (no other key on a short body, a session
// cap) still holds at commit, as the Store contract asks. A transaction that loses a
// conflict (40001) or a deadlock (40P01) is rolled back and its function run again, at most
// maxPostgresAttempts times, after a short random pause. Views run REPEATABLE READ READ
// ONLY: one snapshot, no locks. A transaction's BEGIN goes in one round trip with its first
// statement, and a transaction that sends no statement never begins.
type Postgres struct {
	pool   *pgxpool.Pool
	closed atomic.Bool
	// statements counts the statements sent, for the daemon's and the load tool's figures.
	statements atomic.Uint64

	healthMu   sync.Mutex
	healthAt   time.Time
	lastHealth Health
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
)

// migrations are the schema's versions: migrations[i] takes the schema from version i to
// i+1. A migration is never edited once released; a change is a new one.
var migrations = []string{
	`CREATE TABLE svrp_schema (version integer NOT NULL);
	INSERT INTO svrp_schema VALUES (0);
	CREATE SEQUENCE svrp_put_seq;
	CREATE TABLE svrp_nodes (
		key bytea PRIMARY KEY,
		did bytea NOT NULL,
		did_seq bigint NOT NULL,
		short_body text NOT NULL,
		rec bytea NOT NULL,
		touched bigint,
		rev bigint NOT NULL,
		xid bigint NOT NULL
	);
	CREATE INDEX svrp_nodes_did ON svrp_nodes (did, did_seq);
	CREATE INDEX svrp_nodes_short_body ON svrp_nodes (short_body);
	CREATE INDEX svrp_nodes_xid ON svrp_nodes (xid);
	CREATE TABLE svrp_binding_sessions (
		id bytea PRIMARY KEY,
		node_key bytea NOT NULL,
		code_hash bytea,
		token_hash bytea,
		put_seq bigint NOT NULL,
		rec bytea NOT NULL
	);
	CREATE INDEX svrp_binding_sessions_node ON svrp_binding_sessions (node_key, id);
	CREATE INDEX svrp_binding_sessions_code ON svrp_binding_sessions (code_hash);
	CREATE INDEX svrp_binding_sessions_token ON svrp_binding_sessions (token_hash);
	CREATE TABLE svrp_bindings (
		node_key bytea PRIMARY KEY,
		operator_did bytea NOT NULL,
		rec bytea NOT NULL
	);
	CREATE INDEX svrp_bindings_operator ON svrp_bindings (operator_did, node_key);
	CREATE TABLE svrp_operator_sessions (token_hash bytea PRIMARY KEY, rec bytea NOT NULL);
	CREATE TABLE svrp_counters (key bytea PRIMARY KEY, rec bytea NOT NULL);
	CREATE TABLE svrp_used_challenges (id bytea PRIMARY KEY, expires_at bigint NOT NULL);
	CREATE INDEX svrp_used_challenges_expiry ON svrp_used_challenges (expires_at);
	CREATE TABLE svrp_secrets (name text PRIMARY KEY, value bytea NOT NULL);`,

	// 2: the revocation list, with its size kept in a row of its own so that counting it
	// costs one read.
	`CREATE TABLE svrp_revocations (
		operator_did bytea NOT NULL,
		revocation_id bytea NOT NULL,
		rec bytea NOT NULL,
		PRIMARY KEY (operator_did, revocation_id)
	);
	CREATE TABLE svrp_revocation_count (n bigint NOT NULL);
	INSERT INTO svrp_revocation_count VALUES (0);`,

	// 3: a node key's open sessions are found without reading its history, and a deleted
	// session leaves the hash of its id behind so that the id is never given out again.
	`ALTER TABLE svrp_binding_sessions ADD COLUMN open boolean NOT NULL DEFAULT true;
	DROP INDEX svrp_binding_sessions_node;
	CREATE INDEX svrp_binding_sessions_open ON svrp_binding_sessions (node_key, id) WHERE open;
	CREATE TABLE svrp_used_session_ids (id_hash bytea PRIMARY KEY);`,

	// 4: bearer sessions by operator, so that a revocation finds its sessions at once.
	`ALTER TABLE svrp_operator_sessions ADD COLUMN operator_did bytea NOT NULL DEFAULT '';
	UPDATE svrp_operator_sessions SET operator_did = convert_to(convert_from(rec, 'UTF8')::jsonb->>'operator_did', 'UTF8');
	CREATE INDEX svrp_operator_sessions_operator ON svrp_operator_sessions (operator_did, token_hash);`,
}

// PostgresSchemaVersion is the schema version this build migrates to.
var PostgresSchemaVersion = len(migrations)

// OpenPostgres connects to the PostgreSQL server at url (a postgres:// URL or a keyword/value
// string, as libpq takes) and migrates its schema to [PostgresSchemaVersion], refusing a
// database whose schema is newer than this build knows. Tables go into the first schema of
// the connection's search_path.
func OpenPostgres(ctx context.Context, url string, opts ...PostgresOption) (*Postgres, error) {
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
	p := &Postgres{}
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
	return p, nil
}

// defaultConnectTimeout bounds a connection attempt when the URL sets none
// (connect_timeout): a server whose packets are dropped is reported unavailable, not waited
// for until the request's client gives up.
const defaultConnectTimeout = 5 * time.Second

// PostgresOption configures [OpenPostgres].
type PostgresOption func(*pgxpool.Config)

// WithPostgresPoolSize caps the connections the store keeps open; 0 leaves pgx's default,
// the larger of 4 and the number of CPUs.
func WithPostgresPoolSize(n int) PostgresOption {
	return func(c *pgxpool.Config) {
		if n > 0 {
			c.MaxConns = int32(min(n, math.MaxInt32))
		}
	}
}

// WithPostgresStatementTimeout has the server cancel any statement that runs longer than d
// (statement_timeout); the transaction then fails with [ErrUnavailable]. 0 sets no bound.
// Schema migrations run without it.
func WithPostgresStatementTimeout(d time.Duration) PostgresOption {
	return func(c *pgxpool.Config) {
		if d > 0 {
			c.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(1, d.Milliseconds()), 10)
		}
	}
}

// statementCounter counts statements as pgx sends them.
type statementCounter struct{ n *atomic.Uint64 }

func (c statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	processStatements.Add(1)
	return ctx
}

// processStatements counts the statements of every PostgreSQL store of this process.
var processStatements atomic.Uint64

// PostgresStatements returns the statements every PostgreSQL store of this process has
// sent, transaction control included: what svrpd bench divides by the operations of a
// window to report statements per operation.
func PostgresStatements() uint64 { return processStatements.Load() }

func (statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts the statements of a pipeline, a transaction's BEGIN and first
// statement, as they are sent.
func (c statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	n := uint64(data.Batch.Len())
	c.n.Add(n)
	processStatements.Add(n)
	return ctx
}

func (statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// healthEvery bounds how often Health asks the server: a load balancer polling /health
// costs one statement a second at most.
const healthEvery = time.Second

// Health implements [HealthReporter]: ok while the server answers, gone when it does not.
func (p *Postgres) Health() Health {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	if time.Since(p.healthAt) < healthEvery && p.lastHealth.State != "" {
		return p.lastHealth
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthEvery)
	defer cancel()
	p.lastHealth = Health{State: HealthOK}
	if err := p.pool.Ping(ctx); err != nil {
		p.lastHealth = Health{State: HealthGone, Detail: "the PostgreSQL server does not answer"}
	}
	p.healthAt = time.Now()
	return p.lastHealth
}

// Statements returns the number of statements this store has sent since it was opened,
// transaction control included.
func (p *Postgres) Statements() uint64 { return p.statements.Load() }

func (p *Postgres) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return fmt.Errorf("store: migrating the schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("store: locking the schema for migration: %w", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('svrp_schema') IS NOT NULL`).Scan(&exists); err != nil {
			return fmt.Errorf("store: reading the schema version: %w", err)
		}
		version := 0
		if exists {
			if err := tx.QueryRow(ctx, `SELECT version FROM svrp_schema`).Scan(&version); err != nil {
				return fmt.Errorf("store: reading the schema version: %w", err)
			}
		}
		if version > len(migrations) {
			return fmt.Errorf("store: the database has schema version %d, newer than this build's %d; run a newer svrpd", version, len(migrations))
		}
		for v := version; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("store: migrating the schema to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE svrp_schema SET version = $1`, v+1); err != nil {
				return fmt.Errorf("store: migrating the schema to version %d: %w", v+1, err)
			}
		}
		return nil
	})
}

var (
	_ Store          = (*Postgres)(nil)
	_ Maintainer     = (*Postgres)(nil)
	_ NodeToucher    = (*Postgres)(nil)
	_ HealthReporter = (*Postgres)(nil)
	_ CounterReader  = (*Postgres)(nil)
)

func (p *Postgres) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.closed.Load() {
		return errClosed
	}
	tx := &pgTx{ctx: ctx, tx: &pgConn{pool: p.pool, begin: beginView}}
	defer func() {
		tx.done = true
		tx.tx.release(ctx)
	}()
	return pgUnavailable(fn(tx))
}

func (p *Postgres) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.closed.Load() {
		return errClosed
	}
	pause := time.Millisecond
	start := time.Now()
	for attempt := 1; ; attempt++ {
		commitSent, err := p.updateOnce(ctx, fn)
		switch {
		case err == nil:
			return nil
		case retryable(err) && attempt < maxPostgresAttempts:
		case pgUnreachable(err) && (!commitSent || pgconn.SafeToRetry(err)) && time.Since(start) < reconnectWithin:
		default:
			return pgUnavailable(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(mrand.N(pause)):
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// updateOnce runs fn in one SERIALIZABLE transaction. A conflict or a lost connection
// reported to fn by any statement makes the whole attempt retryable, whatever fn returned
// after seeing it. commitSent reports that the COMMIT was sent, after which a lost
// connection leaves the outcome unknown.
func (p *Postgres) updateOnce(ctx context.Context, fn func(Tx) error) (commitSent bool, err error) {
	tx := &pgTx{ctx: ctx, tx: &pgConn{pool: p.pool, begin: beginUpdate}, txState: txState{write: true}}
	defer func() {
		tx.done = true
		tx.tx.release(ctx)
	}()
	err = fn(tx)
	if tx.conflict != nil {
		return false, tx.conflict
	}
	if err != nil {
		return false, err
	}
	if err := tx.tx.commit(ctx); err != nil {
		return true, fmt.Errorf("store: commit: %w", err)
	}
	return true, nil
}

// retryable reports a serialization failure or a deadlock: the transaction did nothing and
// may be run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// reconnectWithin bounds the retries of an Update whose connection failed before its
// COMMIT was sent, so that nothing of it can have committed: a server that restarts within
// it is waited for; one that stays down is reported as [ErrUnavailable].
const reconnectWithin = time.Second

// pgUnavailable wraps as [ErrUnavailable] an error that says the server cannot be reached or
// cannot take work now (see [pgUnreachable]); any other error is returned as it is.
func pgUnavailable(err error) error {
	if err != nil && pgUnreachable(err) {
		return Unavailable(err)
	}
	return err
}

// pgUnreachable reports a failure of the way to the server rather than of the statement: a
// connection refused, lost, timed out or never sent on, and the server's own refusals of
// that kind — shutting down (57P01, 57P02), starting up or recovering (57P03), out of
// connections (53300), a statement timeout (57014) and any connection exception (class 08).
func pgUnreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300", "57014":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

func (p *Postgres) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.pool.Close()
	return nil
}

// Maintain forgets consumed login challenges that have expired, in batches.
func (p *Postgres) Maintain(ctx context.Context) error {
	for {
		tag, err := p.pool.Exec(ctx, `DELETE FROM svrp_used_challenges WHERE id IN
			(SELECT id FROM svrp_used_challenges WHERE expires_at <= $1 LIMIT $2)`, time.Now().Unix(), pgPage)
		if err != nil {
			return fmt.Errorf("store: forgetting used challenges: %w", err)
		}
		if tag.RowsAffected() < pgPage {
			return nil
		}
	}
}

// Secret returns the 32-byte secret kept under name, creating it from crypto/rand when the
// database has none, so that every daemon on the database gets the same one.
func (p *Postgres) Secret(ctx context.Context, name string) ([32]byte, error) {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return fresh, err
	}
	var got []byte
	err := p.pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO svrp_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value)
		SELECT value FROM ins UNION ALL SELECT value FROM svrp_secrets WHERE name = $1 LIMIT 1`, name, fresh[:]).Scan(&got)
	if err != nil || len(got) != 32 {
		return [32]byte{}, fmt.Errorf("store: reading the shared secret %q: %w", name, err)
	}
	return [32]byte(got), nil
}

// Exclusive runs fn if no other holder of the same lock name is running, on this database,
// and reports whether it ran. The lock is a session advisory lock, held on one connection
// for fn's duration and released when fn returns or the connection drops, so a daemon
// killed mid-sweep never blocks the others.
func (p *Postgres) Exclusive(ctx context.Context, lock int64, fn func(context.Context) error) (bool, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return false, pgUnavailable(fmt.Errorf("store: %w", err))
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lock).Scan(&got); err != nil {
		return false, pgUnavailable(fmt.Errorf("store: %w", err))
	}
	if !got {
		return false, nil
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	return true, fn(ctx)
}

// TouchNode moves the node's last_seen forward now, in one statement of its own. The
// daemon batches heartbeats in front of this (see [WithSharedNodeCache]).
func (p *Postgres) TouchNode(key didkey.PublicKey, seen time.Time) error {
	n, err := p.touch(context.Background(), [][]byte{key[:]}, []int64{seen.UnixNano()})
	if err == nil && n == 0 {
		return ErrNotFound
	}
	return err
}

// Flush does nothing: TouchNode writes at once.
func (p *Postgres) Flush(context.Context) error { return nil }

// touch moves last_seen of keys[i] forward to seen[i] (unix nanoseconds) in one statement,
// and returns the rows it found. Moving forward only makes the order in which daemons'
// batches land irrelevant, and makes one statement outside any SERIALIZABLE transaction
// enough.
func (p *Postgres) touch(ctx context.Context, keys [][]byte, seen []int64) (int64, error) {
	for attempt := 1; ; attempt++ {
		tag, err := p.pool.Exec(ctx, `UPDATE svrp_nodes AS n
			SET touched = GREATEST(n.touched, u.seen), rev = n.rev + 1, xid = pg_current_xact_id()::text::bigint
			FROM unnest($1::bytea[], $2::bigint[]) AS u(key, seen)
			WHERE n.key = u.key`, keys, seen)
		if err == nil {
			return tag.RowsAffected(), nil
		}
		if !retryable(err) || attempt == maxPostgresAttempts {
			return 0, pgUnavailable(fmt.Errorf("store: recording heartbeats: %w", err))
		}
	}
}

// pgTx is one transaction. conflict keeps the first serialization failure, deadlock or lost
// connection a statement met: after it the transaction can only be retried.
type pgTx struct {
	txState
	ctx      context.Context
	tx       *pgConn
	conflict error
}

var _ Tx = (*pgTx)(nil)

// check turns a statement's error into the store's: no rows is ErrNotFound, a conflict or a
// lost connection is remembered for Update and reported as ErrUnavailable.
func (t *pgTx) check(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case retryable(err) || pgUnreachable(err):
		if t.conflict == nil {
			t.conflict = err
		}
	}
	return pgUnavailable(fmt.Errorf("store: %w", err))
}

func (t *pgTx) exec(sql string, args ...any) error {
	_, err := t.tx.Exec(t.ctx, sql, args...)
	return t.check(err)
}

// nodeFrom decodes a node row: the record, and last_seen moved to the latest coalesced
// heartbeat when that is later.
func nodeFrom(rec []byte, touched *int64) (Node, error) {
	n, err := decodeNode(rec)
	if err != nil {
		return Node{}, fmt.Errorf("store: failed to decode a node record: %w", err)
	}
	if touched != nil {
		if seen := time.Unix(0, *touched).UTC(); seen.After(n.LastSeen) {
			n.LastSeen = seen
		}
	}
	return n, nil
}

func (t *pgTx) Node(k didkey.PublicKey) (Node, error) {
	if err := t.readable(); err != nil {
		return Node{}, err
	}
	var rec []byte
	var touched *int64
	err := t.tx.QueryRow(t.ctx, `SELECT rec, touched FROM svrp_nodes WHERE key = $1`, k[:]).Scan(&rec, &touched)
	if err := t.check(err); err != nil {
		return Node{}, err
	}
	return nodeFrom(rec, touched)
}

func (t *pgTx) PutNode(n Node) error {
	_, err := t.putNodeRev(n)
	return err
}

func (t *pgTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	if err := t.readable(); err != nil {
		return didkey.PublicKey{}, err
	}
	if did == "" {
		return didkey.PublicKey{}, ErrNotFound
	}
	var k []byte
	err := t.tx.QueryRow(t.ctx, `SELECT key FROM svrp_nodes WHERE did = $1 ORDER BY did_seq DESC LIMIT 1`, []byte(did)).Scan(&k)
	if err := t.check(err); err != nil {
		return didkey.PublicKey{}, err
	}
	return keyFrom(k)
}

func keyFrom(b []byte) (didkey.PublicKey, error) {
	if len(b) != len(didkey.PublicKey{}) {
		return didkey.PublicKey{}, errors.New("store: corrupt key column")
	}
	return didkey.PublicKey(b), nil
}

// keys collects one column of keys from a query.
func (t *pgTx) keys(sql string, args ...any) ([]didkey.PublicKey, error) {
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err := t.check(err); err != nil {
		return nil, err
	}
	var out []didkey.PublicKey
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return nil, t.check(err)
		}
		k, err := keyFrom(b)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, k)
	}
	return out, t.check(rows.Err())
}

func (t *pgTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	return t.keys(`SELECT key FROM svrp_nodes WHERE short_body = $1 ORDER BY key`, body)
}

// page reads rows of one table in key order, pgPage at a time, and calls fn on each after
// the page is read: a connection serves one statement at a time, and fn may read through
// the Tx. Writes from fn are refused, as the contract says.
func page[T any](t *pgTx, sql string, start any, scan func(pgx.Rows) (key any, v T, err error), fn func(T) error) error {
	if err := t.readable(); err != nil {
		return err
	}
	t.iterating++
	defer func() { t.iterating-- }()
	// The first page starts at the smallest key, the empty one included.
	after, q := start, strings.Replace(sql, "> $1", ">= $1", 1)
	for {
		rows, err := t.tx.Query(t.ctx, q, after, pgPage)
		q = sql
		if err := t.check(err); err != nil {
			return err
		}
		var vs []T
		for rows.Next() {
			k, v, err := scan(rows)
			if err != nil {
				rows.Close()
				return err
			}
			after = k
			vs = append(vs, v)
		}
		if err := t.check(rows.Err()); err != nil {
			return err
		}
		for _, v := range vs {
			if err := fn(v); err != nil {
				return err
			}
		}
		if len(vs) < pgPage {
			return nil
		}
	}
}

func (t *pgTx) EachNode(fn func(Node) error) error {
	return page(t, `SELECT key, rec, touched FROM svrp_nodes WHERE key > $1 ORDER BY key LIMIT $2`, []byte{},
		func(r pgx.Rows) (any, Node, error) {
			var k, rec []byte
			var touched *int64
			if err := r.Scan(&k, &rec, &touched); err != nil {
				return nil, Node{}, t.check(err)
			}
			n, err := nodeFrom(rec, touched)
			return k, n, err
		}, fn)
}

func (t *pgTx) NodeCount() (int, error) {
	if err := t.readable(); err != nil {
		return 0, err
	}
	var n int
	err := t.tx.QueryRow(t.ctx, `SELECT count(*) FROM svrp_nodes`).Scan(&n)
	return n, t.check(err)
}

// jsonRow reads one JSON record.
func jsonRow[T any](t *pgTx, sql string, args ...any) (T, error) {
	var v T
	var rec []byte
	if err := t.check(t.tx.QueryRow(t.ctx, sql, args...).Scan(&rec)); err != nil {
		return v, err
	}
	if err := json.Unmarshal(rec, &v); err != nil {
		return v, fmt.Errorf("store: failed to decode a record: %w", err)
	}
	return v, nil
}

// jsonRows reads a list of JSON records.
func jsonRows[T any](t *pgTx, sql string, args ...any) ([]T, error) {
	rows, err := t.tx.Query(t.ctx, sql, args...)
	if err := t.check(err); err != nil {
		return nil, err
	}
	var out []T
	for rows.Next() {
		var rec []byte
		if err := rows.Scan(&rec); err != nil {
			rows.Close()
			return nil, t.check(err)
		}
		var v T
		if err := json.Unmarshal(rec, &v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: failed to decode a record: %w", err)
		}
		out = append(out, v)
	}
	return out, t.check(rows.Err())
}

func (t *pgTx) BindingSession(id string) (binding.BindingSession, error) {
	if err := t.readable(); err != nil {
		return binding.BindingSession{}, err
	}
	return jsonRow[binding.BindingSession](t, `SELECT rec FROM svrp_binding_sessions WHERE id = $1`, []byte(id))
}

// hashArg is a secret hash as a column: NULL for the zero hash, which means "none".
func hashArg(h [32]byte) any {
	if h == ([32]byte{}) {
		return nil
	}
	return h[:]
}

func (t *pgTx) PutBindingSession(s binding.BindingSession) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := checkSession(s); err != nil {
		return err
	}
	rec, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("store: encoding a binding session: %w", err)
	}
	// put_seq moves on every put: of two sessions holding one hash, the lookup finds the
	// one put last.
	return t.exec(`INSERT INTO svrp_binding_sessions (id, node_key, code_hash, token_hash, put_seq, rec, open)
		VALUES ($1, $2, $3, $4, nextval('svrp_put_seq'), $5, $6)
		ON CONFLICT (id) DO UPDATE SET node_key = EXCLUDED.node_key, code_hash = EXCLUDED.code_hash,
			token_hash = EXCLUDED.token_hash, put_seq = EXCLUDED.put_seq, rec = EXCLUDED.rec, open = EXCLUDED.open`,
		[]byte(s.ID), s.NodeKey[:], hashArg(s.CodeHash), hashArg(s.TokenHash), rec, !s.State.Terminal())
}

func (t *pgTx) DeleteBindingSession(id string) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `DELETE FROM svrp_binding_sessions WHERE id = $1`, []byte(id))
	if err := t.check(err); err != nil || tag.RowsAffected() == 0 {
		return err
	}
	return t.exec(`INSERT INTO svrp_used_session_ids (id_hash) VALUES ($1) ON CONFLICT DO NOTHING`, []byte(usedIDHash(id)))
}

func (t *pgTx) BindingSessionIDUsed(id string) (bool, error) {
	if err := t.readable(); err != nil {
		return false, err
	}
	var used bool
	err := t.tx.QueryRow(t.ctx, `SELECT EXISTS (SELECT 1 FROM svrp_binding_sessions WHERE id = $1)
		OR EXISTS (SELECT 1 FROM svrp_used_session_ids WHERE id_hash = $2)`, []byte(id), []byte(usedIDHash(id))).Scan(&used)
	return used, t.check(err)
}

func (t *pgTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	if err := t.readable(); err != nil {
		return "", err
	}
	if h == ([32]byte{}) {
		return "", ErrNotFound
	}
	var id []byte
	err := t.tx.QueryRow(t.ctx, `SELECT id FROM svrp_binding_sessions WHERE code_hash = $1 OR token_hash = $1
		ORDER BY put_seq DESC LIMIT 1`, h[:]).Scan(&id)
	return string(id), t.check(err)
}

func (t *pgTx) OpenBindingSessionsByNode(k didkey.PublicKey) ([]binding.BindingSession, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	return jsonRows[binding.BindingSession](t, `SELECT rec FROM svrp_binding_sessions WHERE node_key = $1 AND open ORDER BY id`, k[:])
}

func (t *pgTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	return page(t, `SELECT id, rec FROM svrp_binding_sessions WHERE id > $1 ORDER BY id LIMIT $2`, []byte{},
		func(r pgx.Rows) (any, binding.BindingSession, error) {
			var id, rec []byte
			var s binding.BindingSession
			if err := r.Scan(&id, &rec); err != nil {
				return nil, s, t.check(err)
			}
			if err := json.Unmarshal(rec, &s); err != nil {
				return nil, s, fmt.Errorf("store: failed to decode a binding session: %w", err)
			}
			return id, s, nil
		}, fn)
}

func (t *pgTx) Binding(node didkey.PublicKey) (binding.Binding, error) {
	if err := t.readable(); err != nil {
		return binding.Binding{}, err
	}
	return jsonRow[binding.Binding](t, `SELECT rec FROM svrp_bindings WHERE node_key = $1`, node[:])
}

func (t *pgTx) PutBinding(b binding.Binding) error {
	if err := t.writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("store: encoding a binding: %w", err)
	}
	return t.exec(`INSERT INTO svrp_bindings (node_key, operator_did, rec) VALUES ($1, $2, $3)
		ON CONFLICT (node_key) DO UPDATE SET operator_did = EXCLUDED.operator_did, rec = EXCLUDED.rec`,
		b.NodeKey[:], []byte(b.OperatorDID), rec)
}

func (t *pgTx) BindingsByOperator(operatorDID string) ([]binding.Binding, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	if operatorDID == "" {
		return nil, nil
	}
	return jsonRows[binding.Binding](t, `SELECT rec FROM svrp_bindings WHERE operator_did = $1 ORDER BY node_key`, []byte(operatorDID))
}

func (t *pgTx) DeleteBinding(node didkey.PublicKey) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_bindings WHERE node_key = $1`, node[:])
}

func (t *pgTx) Revocation(operatorDID, revocationID string) (Revocation, error) {
	if err := t.readable(); err != nil {
		return Revocation{}, err
	}
	return jsonRow[Revocation](t, `SELECT rec FROM svrp_revocations WHERE operator_did = $1 AND revocation_id = $2`,
		[]byte(operatorDID), []byte(revocationID))
}

func (t *pgTx) PutRevocation(r Revocation) error {
	if err := t.writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encoding a revocation: %w", err)
	}
	// xmax is 0 on a row just inserted: only a new pair counts.
	var inserted bool
	err = t.tx.QueryRow(t.ctx, `INSERT INTO svrp_revocations (operator_did, revocation_id, rec) VALUES ($1, $2, $3)
		ON CONFLICT (operator_did, revocation_id) DO UPDATE SET rec = EXCLUDED.rec
		RETURNING xmax = 0`, []byte(r.OperatorDID), []byte(r.RevocationID), rec).Scan(&inserted)
	if err := t.check(err); err != nil {
		return err
	}
	if !inserted {
		return nil
	}
	return t.exec(`UPDATE svrp_revocation_count SET n = n + 1`)
}

func (t *pgTx) RevocationCount() (int, error) {
	if err := t.readable(); err != nil {
		return 0, err
	}
	var n int
	err := t.tx.QueryRow(t.ctx, `SELECT n FROM svrp_revocation_count`).Scan(&n)
	return n, t.check(err)
}

func (t *pgTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	if err := t.readable(); err != nil {
		return authn.BearerSession{}, err
	}
	return jsonRow[authn.BearerSession](t, `SELECT rec FROM svrp_operator_sessions WHERE token_hash = $1`, tokenHash[:])
}

func (t *pgTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	if err := t.writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("store: encoding a bearer session: %w", err)
	}
	return t.exec(`INSERT INTO svrp_operator_sessions (token_hash, rec, operator_did) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO UPDATE SET rec = EXCLUDED.rec, operator_did = EXCLUDED.operator_did`,
		tokenHash[:], rec, []byte(s.OperatorDID))
}

func (t *pgTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT token_hash FROM svrp_operator_sessions WHERE operator_did = $1 ORDER BY token_hash`,
		[]byte(operatorDID))
	if err := t.check(err); err != nil {
		return nil, err
	}
	var out [][32]byte
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return nil, t.check(err)
		}
		if len(h) != 32 {
			rows.Close()
			return nil, errors.New("store: corrupt token hash column")
		}
		out = append(out, [32]byte(h))
	}
	return out, t.check(rows.Err())
}

func (t *pgTx) DeleteBearerSession(tokenHash [32]byte) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_operator_sessions WHERE token_hash = $1`, tokenHash[:])
}

type hashed[T any] struct {
	h [32]byte
	v T
}

func (t *pgTx) EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error {
	return page(t, `SELECT token_hash, rec FROM svrp_operator_sessions WHERE token_hash > $1 ORDER BY token_hash LIMIT $2`, []byte{},
		func(r pgx.Rows) (any, hashed[authn.BearerSession], error) {
			var h, rec []byte
			var e hashed[authn.BearerSession]
			if err := r.Scan(&h, &rec); err != nil {
				return nil, e, t.check(err)
			}
			if len(h) != 32 {
				return nil, e, errors.New("store: corrupt token hash column")
			}
			e.h = [32]byte(h)
			if err := json.Unmarshal(rec, &e.v); err != nil {
				return nil, e, fmt.Errorf("store: failed to decode a bearer session: %w", err)
			}
			return h, e, nil
		}, func(e hashed[authn.BearerSession]) error { return fn(e.h, e.v) })
}

func (t *pgTx) Counter(key string) (binding.Counter, error) {
	if err := t.readable(); err != nil {
		return binding.Counter{}, err
	}
	c, err := jsonRow[binding.Counter](t, `SELECT rec FROM svrp_counters WHERE key = $1`, []byte(key))
	if errors.Is(err, ErrNotFound) {
		return binding.Counter{}, nil
	}
	return c, err
}

func (t *pgTx) Counters(keys ...string) ([]binding.Counter, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	cs, err := readCounters(t.ctx, t.tx, keys)
	return cs, t.check(err)
}

// ReadCounters implements [CounterReader]: one statement, whose snapshot is its own.
func (p *Postgres) ReadCounters(ctx context.Context, keys ...string) ([]binding.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, errClosed
	}
	cs, err := readCounters(ctx, p.pool, keys)
	if err != nil {
		return nil, pgUnavailable(fmt.Errorf("store: %w", err))
	}
	return cs, nil
}

// readCounters reads the counters under keys, in their order, in one statement on q.
func readCounters(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, keys []string) ([]binding.Counter, error) {
	out := make([]binding.Counter, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	args := make([][]byte, len(keys))
	for i, k := range keys {
		args[i] = []byte(k)
	}
	rows, err := q.Query(ctx, `SELECT key, rec FROM svrp_counters WHERE key = ANY($1)`, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[string]binding.Counter, len(keys))
	for rows.Next() {
		var k, rec []byte
		if err := rows.Scan(&k, &rec); err != nil {
			return nil, err
		}
		var c binding.Counter
		if err := json.Unmarshal(rec, &c); err != nil {
			return nil, fmt.Errorf("failed to decode a counter: %w", err)
		}
		found[string(k)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, k := range keys {
		out[i] = found[k]
	}
	return out, nil
}

// CountEvent increments the counter in the row, in one statement: concurrent events on one
// counter queue on its row lock rather than each reading it first. The window is still
// running when the stored start is after now (as Fail truncates it) less the window;
// PostgreSQL reads the start, as JSON keeps it, to the microsecond.
func (t *pgTx) CountEvent(key string, now time.Time, window time.Duration) (binding.Counter, error) {
	if err := t.writable(); err != nil {
		return binding.Counter{}, err
	}
	fresh := binding.Counter{}.Fail(now, window)
	rec, err := json.Marshal(fresh)
	if err != nil {
		return binding.Counter{}, fmt.Errorf("store: encoding a counter: %w", err)
	}
	var got []byte
	err = t.tx.QueryRow(t.ctx, `INSERT INTO svrp_counters AS c (key, rec) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET rec = (
			SELECT CASE WHEN (old->>'count')::bigint > 0 AND (old->>'start')::timestamptz > $3
				THEN convert_to(jsonb_set(old, '{count}',
					to_jsonb(LEAST((old->>'count')::bigint, 9223372036854775806) + 1))::text, 'UTF8')
				ELSE EXCLUDED.rec END
			FROM (SELECT convert_from(c.rec, 'UTF8')::jsonb AS old) AS o)
		RETURNING rec`, []byte(key), rec, fresh.Start.Add(-window)).Scan(&got)
	if err := t.check(err); err != nil {
		return binding.Counter{}, err
	}
	var c binding.Counter
	if err := json.Unmarshal(got, &c); err != nil {
		return binding.Counter{}, fmt.Errorf("store: failed to decode a counter: %w", err)
	}
	return c, nil
}

func (t *pgTx) PutCounter(key string, c binding.Counter) error {
	if err := t.writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("store: encoding a counter: %w", err)
	}
	return t.exec(`INSERT INTO svrp_counters (key, rec) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET rec = EXCLUDED.rec`, []byte(key), rec)
}

func (t *pgTx) DeleteCounter(key string) error {
	if err := t.writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_counters WHERE key = $1`, []byte(key))
}

type named[T any] struct {
	k string
	v T
}

func (t *pgTx) EachCounter(fn func(key string, c binding.Counter) error) error {
	return page(t, `SELECT key, rec FROM svrp_counters WHERE key > $1 ORDER BY key LIMIT $2`, []byte{},
		func(r pgx.Rows) (any, named[binding.Counter], error) {
			var k, rec []byte
			var e named[binding.Counter]
			if err := r.Scan(&k, &rec); err != nil {
				return nil, e, t.check(err)
			}
			e.k = string(k)
			if err := json.Unmarshal(rec, &e.v); err != nil {
				return nil, e, fmt.Errorf("store: failed to decode a counter: %w", err)
			}
			return k, e, nil
		}, func(e named[binding.Counter]) error { return fn(e.k, e.v) })
}

// ConsumeChallenge records a login challenge as used until its expiry, and fails with
// ErrChallengeUsed when it already is. Inside an Update, it makes the consumption part of
// the login's transaction: of concurrent logins with one challenge on any number of daemons,
// exactly one commits.
func (t *pgTx) ConsumeChallenge(id []byte, expires time.Time) error {
	if err := t.writable(); err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `INSERT INTO svrp_used_challenges (id, expires_at) VALUES ($1, $2)
		ON CONFLICT (id) DO NOTHING`, id, expires.Unix())
	if err := t.check(err); err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrChallengeUsed
	}
	return nil
}

// ErrChallengeUsed is returned by ConsumeChallenge for a challenge consumed before.
var ErrChallengeUsed = errors.New("store: challenge already used")

// ChallengeConsumer is implemented by the Tx of a store that keeps consumed login challenges,
// so that registries sharing the store accept each challenge once between them.
type ChallengeConsumer interface {
	ConsumeChallenge(id []byte, expires time.Time) error
}

// nodeChanges implements nodeFeed. mark is the oldest transaction id whose writes the caller
// may not have seen: every row written by a transaction at or after it is read again. The
// next mark is the xmin of this read's snapshot, the oldest transaction still running when
// it was taken, so a transaction that commits after this read but started before it is read
// next time. Rows read twice are told apart by their revision.
func (p *Postgres) nodeChanges(ctx context.Context, mark int64, fn func(n Node, rev uint64)) (int64, error) {
	next := mark
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT rec, touched, rev FROM svrp_nodes WHERE xid >= $1`, mark)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rec []byte
			var touched *int64
			var rev int64
			if err := rows.Scan(&rec, &touched, &rev); err != nil {
				return err
			}
			n, err := nodeFrom(rec, touched)
			if err != nil {
				return err
			}
			fn(n, uint64(rev))
		}
		return rows.Err()
	})
	if err != nil {
		return mark, fmt.Errorf("store: reading node changes: %w", err)
	}
	return next, nil
}

// touchBatch implements nodeFeed.
func (p *Postgres) touchBatch(ctx context.Context, keys [][]byte, seen []int64) error {
	_, err := p.touch(ctx, keys, seen)
	return err
}

// putNodeRev is PutNode returning the row's new revision, for the node cache. did_seq moves
// only when the DID changes, so that of two records with one DID the lookup finds the one
// that took it last, as the other stores do.
func (t *pgTx) putNodeRev(n Node) (uint64, error) {
	if err := t.writable(); err != nil {
		return 0, err
	}
	var rev int64
	err := t.tx.QueryRow(t.ctx, `INSERT INTO svrp_nodes (key, did, did_seq, short_body, rec, touched, rev, xid)
		VALUES ($1, $2, nextval('svrp_put_seq'), $3, $4, NULL, 1, pg_current_xact_id()::text::bigint)
		ON CONFLICT (key) DO UPDATE SET
			did = EXCLUDED.did,
			did_seq = CASE WHEN svrp_nodes.did = EXCLUDED.did THEN svrp_nodes.did_seq ELSE EXCLUDED.did_seq END,
			rec = EXCLUDED.rec, touched = NULL, rev = svrp_nodes.rev + 1, xid = EXCLUDED.xid
		RETURNING rev`,
		n.Key[:], []byte(n.DID), n.Key.ShortBody(), appendNode(nil, n)).Scan(&rev)
	return uint64(rev), t.check(err)
}
