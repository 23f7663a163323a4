package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// pgTx is one transaction. conflict keeps the first serialization failure or deadlock a
// statement met: after it the transaction can only be retried.
type pgTx struct {
	rules.TxState
	ctx      context.Context
	tx       *pgConn
	conflict error
}

var _ store.Tx = (*pgTx)(nil)

// check turns a statement's error into the store's: no rows is ErrNotFound, a conflict or a
// lost connection is remembered for Update and reported as ErrUnavailable.
func (t *pgTx) check(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case retryable(err) || unreachable(err):
		if t.conflict == nil {
			t.conflict = err
		}
	}
	return unavailable(fmt.Errorf("store: %w", err))
}

func (t *pgTx) exec(sql string, args ...any) error {
	_, err := t.tx.Exec(t.ctx, sql, args...)
	return t.check(err)
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

// page reads rows of one table in key order, pgPage at a time, and calls fn on each after
// the page is read: a connection serves one statement at a time, and fn may read through
// the Tx. Writes from fn are refused, as the contract says. sql selects the rows whose key
// is > the parameters that come first, as many as start holds, and takes the page size as
// the last; scan returns each row's key in the same columns.
func page[T any](t *pgTx, sql string, start []any, scan func(pgx.Rows) (key []any, v T, err error), fn func(T) error) error {
	if err := t.Readable(); err != nil {
		return err
	}
	t.Iterating++
	defer func() { t.Iterating-- }()
	// The first page starts at the smallest key, the empty one included.
	after, q := start, strings.Replace(sql, " > ", " >= ", 1)
	for {
		rows, err := t.tx.Query(t.ctx, q, append(slices.Clip(after), pgPage)...)
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

// writeJSON runs sql, a write, with args and then v's JSON as its last parameter, the rec
// column.
func (t *pgTx) writeJSON(what string, v any, sql string, args ...any) error {
	if err := t.Writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encoding %s: %w", what, err)
	}
	return t.exec(sql, append(args, rec)...)
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

// keyed is a record with the key of its row.
type keyed[K, T any] struct {
	k K
	v T
}

// eachRecord pages through rows of a key and a JSON record in key order, as sql selects
// them, and calls fn with what keyOf makes of each key and the decoded record.
func eachRecord[K, T any](t *pgTx, sql, what string, keyOf func([]byte) (K, error), fn func(K, T) error) error {
	return page(t, sql, []any{[]byte{}}, func(r pgx.Rows) ([]any, keyed[K, T], error) {
		var k, rec []byte
		var e keyed[K, T]
		if err := r.Scan(&k, &rec); err != nil {
			return nil, e, t.check(err)
		}
		var err error
		if e.k, err = keyOf(k); err != nil {
			return nil, e, err
		}
		if err := json.Unmarshal(rec, &e.v); err != nil {
			return nil, e, fmt.Errorf("store: failed to decode %s: %w", what, err)
		}
		return []any{k}, e, nil
	}, func(e keyed[K, T]) error { return fn(e.k, e.v) })
}
