package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// Binding sessions, active bindings, bearer sessions, revocations and counters are JSON
// rows beside the columns their lookups need, each with its index: the rows are the
// indexes, so a put is one statement. Revocations are counted in a row of their own as each
// new one is put, so that the bound on the list is one read.

func (t *pgTx) BindingSession(id string) (binding.BindingSession, error) {
	if err := t.Readable(); err != nil {
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
	if err := t.Writable(); err != nil {
		return err
	}
	if err := rules.CheckSession(s); err != nil {
		return err
	}
	// put_seq moves on every put: of two sessions holding one hash, the lookup finds the
	// one put last.
	return t.writeJSON("a binding session", s, `INSERT INTO svrp_binding_sessions (id, node_key, code_hash, token_hash, put_seq, open, rec)
		VALUES ($1, $2, $3, $4, nextval('svrp_put_seq'), $5, $6)
		ON CONFLICT (id) DO UPDATE SET node_key = EXCLUDED.node_key, code_hash = EXCLUDED.code_hash,
			token_hash = EXCLUDED.token_hash, put_seq = EXCLUDED.put_seq, rec = EXCLUDED.rec, open = EXCLUDED.open`,
		[]byte(s.ID), s.NodeKey[:], hashArg(s.CodeHash), hashArg(s.TokenHash), !s.State.Terminal())
}

func (t *pgTx) DeleteBindingSession(id string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `DELETE FROM svrp_binding_sessions WHERE id = $1`, []byte(id))
	if err := t.check(err); err != nil || tag.RowsAffected() == 0 {
		return err
	}
	return t.exec(`INSERT INTO svrp_used_session_ids (id_hash) VALUES ($1) ON CONFLICT DO NOTHING`, []byte(rules.UsedIDHash(id)))
}

func (t *pgTx) BindingSessionIDUsed(id string) (bool, error) {
	if err := t.Readable(); err != nil {
		return false, err
	}
	var used bool
	err := t.tx.QueryRow(t.ctx, `SELECT EXISTS (SELECT 1 FROM svrp_binding_sessions WHERE id = $1)
		OR EXISTS (SELECT 1 FROM svrp_used_session_ids WHERE id_hash = $2)`, []byte(id), []byte(rules.UsedIDHash(id))).Scan(&used)
	return used, t.check(err)
}

func (t *pgTx) BindingSessionIDBySecret(h [32]byte) (string, error) {
	if err := t.Readable(); err != nil {
		return "", err
	}
	if h == ([32]byte{}) {
		return "", store.ErrNotFound
	}
	var id []byte
	err := t.tx.QueryRow(t.ctx, `SELECT id FROM svrp_binding_sessions WHERE code_hash = $1 OR token_hash = $1
		ORDER BY put_seq DESC LIMIT 1`, h[:]).Scan(&id)
	return string(id), t.check(err)
}

func (t *pgTx) OpenBindingSessionsByNode(k didkey.PublicKey) ([]binding.BindingSession, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	return jsonRows[binding.BindingSession](t, `SELECT rec FROM svrp_binding_sessions WHERE node_key = $1 AND open ORDER BY id`, k[:])
}

func (t *pgTx) EachBindingSession(fn func(binding.BindingSession) error) error {
	return eachRecord(t, `SELECT id, rec FROM svrp_binding_sessions WHERE id > $1 ORDER BY id LIMIT $2`, "a binding session",
		func(id []byte) ([]byte, error) { return id, nil }, func(_ []byte, s binding.BindingSession) error { return fn(s) })
}

func (t *pgTx) Binding(node didkey.PublicKey) (binding.Binding, error) {
	if err := t.Readable(); err != nil {
		return binding.Binding{}, err
	}
	return jsonRow[binding.Binding](t, `SELECT rec FROM svrp_bindings WHERE node_key = $1`, node[:])
}

func (t *pgTx) PutBinding(b binding.Binding) error {
	return t.writeJSON("a binding", b, `INSERT INTO svrp_bindings (node_key, operator_did, rec) VALUES ($1, $2, $3)
		ON CONFLICT (node_key) DO UPDATE SET operator_did = EXCLUDED.operator_did, rec = EXCLUDED.rec`,
		b.NodeKey[:], []byte(b.OperatorDID))
}

func (t *pgTx) BindingsByOperator(operatorDID string) ([]binding.Binding, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	if operatorDID == "" {
		return nil, nil
	}
	return jsonRows[binding.Binding](t, `SELECT rec FROM svrp_bindings WHERE operator_did = $1 ORDER BY node_key`, []byte(operatorDID))
}

func (t *pgTx) DeleteBinding(node didkey.PublicKey) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_bindings WHERE node_key = $1`, node[:])
}

func (t *pgTx) EachBinding(fn func(binding.Binding) error) error {
	return eachRecord(t, `SELECT node_key, rec FROM svrp_bindings WHERE node_key > $1 ORDER BY node_key LIMIT $2`, "a binding",
		func(k []byte) ([]byte, error) { return k, nil }, func(_ []byte, b binding.Binding) error { return fn(b) })
}

func (t *pgTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	if err := t.Readable(); err != nil {
		return authn.BearerSession{}, err
	}
	return jsonRow[authn.BearerSession](t, `SELECT rec FROM svrp_operator_sessions WHERE token_hash = $1`, tokenHash[:])
}

func (t *pgTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	return t.writeJSON("a bearer session", s, `INSERT INTO svrp_operator_sessions (token_hash, operator_did, rec) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO UPDATE SET rec = EXCLUDED.rec, operator_did = EXCLUDED.operator_did`,
		tokenHash[:], []byte(s.OperatorDID))
}

func (t *pgTx) BearerSessionsOf(operatorDID string) ([][32]byte, error) {
	if err := t.Readable(); err != nil {
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
	if err := t.Writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_operator_sessions WHERE token_hash = $1`, tokenHash[:])
}

func (t *pgTx) EachBearerSession(fn func(tokenHash [32]byte, s authn.BearerSession) error) error {
	return eachRecord(t, `SELECT token_hash, rec FROM svrp_operator_sessions WHERE token_hash > $1 ORDER BY token_hash LIMIT $2`,
		"a bearer session", func(h []byte) ([32]byte, error) {
			if len(h) != 32 {
				return [32]byte{}, errors.New("store: corrupt token hash column")
			}
			return [32]byte(h), nil
		}, fn)
}

func (t *pgTx) Revocation(operatorDID, revocationID string) (store.Revocation, error) {
	if err := t.Readable(); err != nil {
		return store.Revocation{}, err
	}
	return jsonRow[store.Revocation](t, `SELECT rec FROM svrp_revocations WHERE operator_did = $1 AND revocation_id = $2`,
		[]byte(operatorDID), []byte(revocationID))
}

func (t *pgTx) PutRevocation(r store.Revocation) error {
	if err := t.Writable(); err != nil {
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
	if err := t.Readable(); err != nil {
		return 0, err
	}
	var n int
	err := t.tx.QueryRow(t.ctx, `SELECT n FROM svrp_revocation_count`).Scan(&n)
	return n, t.check(err)
}

func (t *pgTx) Counter(key string) (store.Counter, error) {
	if err := t.Readable(); err != nil {
		return store.Counter{}, err
	}
	c, err := jsonRow[store.Counter](t, `SELECT rec FROM svrp_counters WHERE key = $1`, []byte(key))
	if errors.Is(err, store.ErrNotFound) {
		return store.Counter{}, nil
	}
	return c, err
}

func (t *pgTx) Counters(keys ...string) ([]store.Counter, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	cs, err := readCounters(t.ctx, t.tx, keys)
	return cs, t.check(err)
}

// ReadCounters implements [store.CounterReader]: one statement, whose snapshot is its own.
func (p *Store) ReadCounters(ctx context.Context, keys ...string) ([]store.Counter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.closed.Load() {
		return nil, store.ErrClosed
	}
	cs, err := readCounters(ctx, p.pool, keys)
	if err != nil {
		return nil, unavailable(fmt.Errorf("store: %w", err))
	}
	return cs, nil
}

// readCounters reads the counters under keys, in their order, in one statement on q.
func readCounters(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, keys []string) ([]store.Counter, error) {
	out := make([]store.Counter, len(keys))
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
	found := make(map[string]store.Counter, len(keys))
	for rows.Next() {
		var k, rec []byte
		if err := rows.Scan(&k, &rec); err != nil {
			return nil, err
		}
		var c store.Counter
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
func (t *pgTx) CountEvent(key string, now time.Time, window time.Duration) (store.Counter, error) {
	if err := t.Writable(); err != nil {
		return store.Counter{}, err
	}
	fresh := store.Counter{}.Fail(now, window)
	rec, err := json.Marshal(fresh)
	if err != nil {
		return store.Counter{}, fmt.Errorf("store: encoding a counter: %w", err)
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
		return store.Counter{}, err
	}
	var c store.Counter
	if err := json.Unmarshal(got, &c); err != nil {
		return store.Counter{}, fmt.Errorf("store: failed to decode a counter: %w", err)
	}
	return c, nil
}

func (t *pgTx) PutCounter(key string, c store.Counter) error {
	return t.writeJSON("a counter", c, `INSERT INTO svrp_counters (key, rec) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET rec = EXCLUDED.rec`, []byte(key))
}

func (t *pgTx) DeleteCounter(key string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.exec(`DELETE FROM svrp_counters WHERE key = $1`, []byte(key))
}

func (t *pgTx) EachCounter(fn func(key string, c store.Counter) error) error {
	return eachRecord(t, `SELECT key, rec FROM svrp_counters WHERE key > $1 ORDER BY key LIMIT $2`, "a counter",
		func(k []byte) (string, error) { return string(k), nil }, fn)
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
