package postgres

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

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
	if err := t.Readable(); err != nil {
		return binding.Binding{}, err
	}
	return jsonRow[binding.Binding](t, `SELECT rec FROM svrp_bindings WHERE node_key = $1`, node[:])
}

func (t *pgTx) PutBinding(b binding.Binding) error {
	if err := t.Writable(); err != nil {
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

func (t *pgTx) BearerSession(tokenHash [32]byte) (authn.BearerSession, error) {
	if err := t.Readable(); err != nil {
		return authn.BearerSession{}, err
	}
	return jsonRow[authn.BearerSession](t, `SELECT rec FROM svrp_operator_sessions WHERE token_hash = $1`, tokenHash[:])
}

func (t *pgTx) PutBearerSession(tokenHash [32]byte, s authn.BearerSession) error {
	if err := t.Writable(); err != nil {
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
