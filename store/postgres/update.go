package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

var _ store.Store = (*Store)(nil)

func (p *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.closed.Load() {
		return store.ErrClosed
	}
	tx := &pgTx{ctx: ctx, tx: &pgConn{pool: p.pool, begin: beginView}}
	defer func() {
		tx.Done = true
		tx.tx.release(ctx)
	}()
	return unavailable(fn(tx))
}

func (p *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.closed.Load() {
		return store.ErrClosed
	}
	pause := time.Millisecond
	start := time.Now()
	for attempt := 1; ; attempt++ {
		commitSent, err := p.updateOnce(ctx, fn)
		switch {
		case err == nil:
			return nil
		case retryable(err) && attempt < maxPostgresAttempts:
		case unreachable(err) && (!commitSent || pgconn.SafeToRetry(err)) && time.Since(start) < reconnectWithin:
		default:
			return unavailable(err)
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
func (p *Store) updateOnce(ctx context.Context, fn func(store.Tx) error) (commitSent bool, err error) {
	tx := &pgTx{ctx: ctx, tx: &pgConn{pool: p.pool, begin: beginUpdate}, TxState: rules.TxState{Write: true}}
	defer func() {
		tx.Done = true
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
// it is waited for; one that stays down is reported as [store.ErrUnavailable].
const reconnectWithin = time.Second

// unavailable wraps as [store.ErrUnavailable] an error that says the server cannot be
// reached or cannot take work now (see [unreachable]); any other error is returned as it is.
func unavailable(err error) error {
	if err != nil && unreachable(err) {
		return store.Unavailable(err)
	}
	return err
}

// unreachable reports a failure of the way to the server rather than of the statement: a
// connection refused, lost, timed out or never sent on, and the server's own refusals of
// that kind — shutting down (57P01, 57P02), starting up or recovering (57P03), out of
// connections (53300), a statement timeout (57014) and any connection exception (class 08).
func unreachable(err error) bool {
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

func (p *Store) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.pool.Close()
	return nil
}

// Maintain folds the heartbeat log when a fold is due (foldLog), and forgets node
// deletions no daemon still needs and consumed login challenges that have expired, in
// batches.
func (p *Store) Maintain(ctx context.Context) error {
	if err := p.foldLog(ctx); err != nil {
		return err
	}
	// A node deletion's row is read by the other daemons' caches within a second; an hour
	// on, only a cache that stopped following that long could still need it.
	if _, err := p.pool.Exec(ctx, `DELETE FROM svrp_node_deletions WHERE deleted_at <= $1`, time.Now().Add(-nodeDeletionKept).Unix()); err != nil {
		return fmt.Errorf("store: forgetting node deletions: %w", err)
	}
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
// database has none, so that every daemon on the database gets the same one, however many
// ask at once.
//
// The conflict arm updates the row to itself rather than doing nothing: an upsert that meets
// another's insert waits for it and then returns the row it committed, whereas a read beside
// an insert that did nothing runs on the statement's snapshot, taken before that commit, and
// finds no row.
func (p *Store) Secret(ctx context.Context, name string) ([32]byte, error) {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return fresh, err
	}
	var got []byte
	err := p.pool.QueryRow(ctx, `INSERT INTO svrp_secrets (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = svrp_secrets.value RETURNING value`, name, fresh[:]).Scan(&got)
	if err != nil || len(got) != 32 {
		return [32]byte{}, fmt.Errorf("store: reading the shared secret %q: %w", name, err)
	}
	return [32]byte(got), nil
}

// Exclusive runs fn if no other holder of the same lock name is running, on this database,
// and reports whether it ran. The lock is a session advisory lock, held on one connection
// for fn's duration and released when fn returns or the connection drops, so a daemon
// killed mid-sweep never blocks the others.
func (p *Store) Exclusive(ctx context.Context, lock int64, fn func(context.Context) error) (bool, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return false, unavailable(fmt.Errorf("store: %w", err))
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, lock).Scan(&got); err != nil {
		return false, unavailable(fmt.Errorf("store: %w", err))
	}
	if !got {
		return false, nil
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	return true, fn(ctx)
}

// healthEvery bounds how often Health asks the server: a load balancer polling /health
// costs one statement a second at most.
const healthEvery = time.Second

// Health implements [store.HealthReporter]: ok while the server answers, gone when it does not.
func (p *Store) Health() store.Health {
	h := &p.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) < healthEvery && h.last.State != "" {
		return h.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), healthEvery)
	defer cancel()
	h.last = store.Health{State: store.HealthOK}
	if err := p.pool.Ping(ctx); err != nil {
		h.last = store.Health{State: store.HealthGone, Detail: "the PostgreSQL server does not answer"}
	}
	h.at = time.Now()
	return h.last
}

// serverHealth is the last answer of Health and when it was taken.
type serverHealth struct {
	mu   sync.Mutex
	at   time.Time
	last store.Health
}
