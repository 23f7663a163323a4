package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/svrp/svrp/store"
)

func (t *pgTx) OperatorPin(body string) (store.OperatorPin, error) {
	if err := t.Readable(); err != nil {
		return store.OperatorPin{}, err
	}
	return jsonRow[store.OperatorPin](t, `SELECT rec FROM svrp_operator_pins WHERE body = $1`, []byte(body))
}

func (t *pgTx) PutOperatorPin(p store.OperatorPin) error {
	if err := t.Writable(); err != nil {
		return err
	}
	rec, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store: encoding an operator pin: %w", err)
	}
	return t.exec(`INSERT INTO svrp_operator_pins (body, rec) VALUES ($1, $2)
		ON CONFLICT (body) DO UPDATE SET rec = EXCLUDED.rec`, []byte(p.Body), rec)
}
