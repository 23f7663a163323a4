package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/svrp/svrp/store"
)

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
