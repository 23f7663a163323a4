package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/store"
)

func (t *pgTx) OperatorPin(body string) (store.OperatorPin, error) {
	if err := t.Readable(); err != nil {
		return store.OperatorPin{}, err
	}
	return jsonRow[store.OperatorPin](t, `SELECT rec FROM svrp_operator_pins WHERE body = $1`, []byte(body))
}

// EachOperatorPin reads the pins in one statement: there is one per operator that logged
// in or revoked, and the pins are small.
func (t *pgTx) EachOperatorPin(fn func(store.OperatorPin) error) error {
	if err := t.Readable(); err != nil {
		return err
	}
	ps, err := jsonRows[store.OperatorPin](t, `SELECT rec FROM svrp_operator_pins ORDER BY body`)
	if err != nil {
		return err
	}
	t.Iterating++
	defer func() { t.Iterating-- }()
	for _, p := range ps {
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

func (t *pgTx) PutOperatorPin(p store.OperatorPin) error {
	return t.writeJSON("an operator pin", p, `INSERT INTO svrp_operator_pins (body, rec) VALUES ($1, $2)
		ON CONFLICT (body) DO UPDATE SET rec = EXCLUDED.rec`, []byte(p.Body))
}

func (t *pgTx) DeleteRevocation(operatorDID, revocationID string) error {
	if err := t.Writable(); err != nil {
		return err
	}
	tag, err := t.tx.Exec(t.ctx, `DELETE FROM svrp_revocations WHERE operator_did = $1 AND revocation_id = $2`,
		[]byte(operatorDID), []byte(revocationID))
	if err := t.check(err); err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return t.exec(`UPDATE svrp_revocation_count SET n = n - 1`)
}

// EachRevocation reads the list a page at a time, in key order; a page is read whole before
// fn sees it, as every Each of this store does.
func (t *pgTx) EachRevocation(fn func(store.Revocation) error) error {
	return page(t, `SELECT operator_did, revocation_id, rec FROM svrp_revocations
			WHERE (operator_did, revocation_id) > ($1, $2) ORDER BY operator_did, revocation_id LIMIT $3`, []any{[]byte{}, []byte{}},
		func(r pgx.Rows) ([]any, store.Revocation, error) {
			var did, id, rec []byte
			if err := r.Scan(&did, &id, &rec); err != nil {
				return nil, store.Revocation{}, t.check(err)
			}
			var rv store.Revocation
			if err := json.Unmarshal(rec, &rv); err != nil {
				return nil, rv, fmt.Errorf("store: failed to decode a revocation: %w", err)
			}
			return []any{did, id}, rv, nil
		}, fn)
}
