package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

func (t *pgTx) Counter(key string) (binding.Counter, error) {
	if err := t.Readable(); err != nil {
		return binding.Counter{}, err
	}
	c, err := jsonRow[binding.Counter](t, `SELECT rec FROM svrp_counters WHERE key = $1`, []byte(key))
	if errors.Is(err, store.ErrNotFound) {
		return binding.Counter{}, nil
	}
	return c, err
}

func (t *pgTx) Counters(keys ...string) ([]binding.Counter, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	cs, err := readCounters(t.ctx, t.tx, keys)
	return cs, t.check(err)
}

// ReadCounters implements [store.CounterReader]: one statement, whose snapshot is its own.
func (p *Store) ReadCounters(ctx context.Context, keys ...string) ([]binding.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, store.ErrClosed
	}
	cs, err := readCounters(ctx, p.pool, keys)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
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
	if err := t.Writable(); err != nil {
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
	if err := t.Writable(); err != nil {
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
	if err := t.Writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_counters WHERE key = $1`, []byte(key))
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
	if err := t.Writable(); err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `INSERT INTO svrp_used_challenges (id, expires_at) VALUES ($1, $2)
		ON CONFLICT (id) DO NOTHING`, id, expires.Unix())
	if err := t.check(err); err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return store.ErrChallengeUsed
	}
	return nil
}
