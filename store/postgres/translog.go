package postgres

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/rules"
)

// logSeedName is the row of svrp_secrets that holds the seed of the log's signing key.
const logSeedName = "log-seed"

func (t *pgTx) LogSize() (int64, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	var n int64
	err := t.tx.QueryRow(t.ctx, `SELECT n FROM svrp_log_size`).Scan(&n)
	return n, t.check(err)
}

func (t *pgTx) LogEntries(start, end int64) ([][]byte, error) {
	size, err := t.LogSize()
	if err != nil {
		return nil, err
	}
	if err := rules.CheckLogRange(size, start, end); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT entry FROM svrp_log_entries WHERE idx >= $1 AND idx < $2 ORDER BY idx`, start, end)
	if err := t.check(err); err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([][]byte, 0, end-start)
	for rows.Next() {
		var e []byte
		if err := rows.Scan(&e); err != nil {
			return nil, t.check(err)
		}
		out = append(out, e)
	}
	if err := t.check(rows.Err()); err != nil {
		return nil, err
	}
	if int64(len(out)) != end-start {
		return nil, fmt.Errorf("store: %d log entries of [%d, %d) stored", len(out), start, end)
	}
	return out, nil
}

func (t *pgTx) LogHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT idx, hash FROM svrp_log_hashes WHERE idx = ANY($1)`, indexes)
	if err := t.check(err); err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var (
			i int64
			h []byte
		)
		if err := rows.Scan(&i, &h); err != nil {
			return nil, t.check(err)
		}
		if len(h) != len(tlog.Hash{}) {
			return nil, fmt.Errorf("store: log hash %d is %d bytes", i, len(h))
		}
		got[i] = tlog.Hash(h)
	}
	if err := t.check(rows.Err()); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := got[x]
		if !ok {
			return nil, store.ErrNotFound
		}
		out[i] = h
	}
	return out, nil
}

// AppendLog moves the size row from index to index+1 and writes the entry and its hashes
// in one statement. The size row is what two concurrent appends conflict on.
func (t *pgTx) AppendLog(index int64, entry []byte, hashes []tlog.Hash) error {
	if err := rules.CheckLogAppend(&t.TxState, t.LogSize, index, hashes); err != nil {
		return err
	}
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		hs[i] = hashes[i][:]
	}
	return t.exec(`WITH s AS (UPDATE svrp_log_size SET n = n + 1 WHERE n = $1 RETURNING n),
		e AS (INSERT INTO svrp_log_entries (idx, entry) SELECT $1, $2 FROM s)
		INSERT INTO svrp_log_hashes (idx, hash) SELECT $3 + u.o - 1, u.h FROM s, unnest($4::bytea[]) WITH ORDINALITY AS u(h, o)`,
		index, entry, tlog.StoredHashIndex(0, index), hs)
}

func (t *pgTx) LogSeed() ([32]byte, error) {
	if err := t.Readable(); err != nil {
		return [32]byte{}, err
	}
	var v []byte
	err := t.tx.QueryRow(t.ctx, `SELECT value FROM svrp_secrets WHERE name = $1`, logSeedName).Scan(&v)
	if err := t.check(err); err != nil {
		return [32]byte{}, err
	}
	if len(v) != 32 {
		return [32]byte{}, fmt.Errorf("store: the log's seed is %d bytes", len(v))
	}
	return [32]byte(v), nil
}

func (t *pgTx) PutLogSeed(seed [32]byte) error {
	if err := t.Writable(); err != nil {
		return err
	}
	return t.exec(`INSERT INTO svrp_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, logSeedName, seed[:])
}
