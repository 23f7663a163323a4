package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/internal/nodecodec"
)

// TouchNode moves the node's last_seen forward now, in one statement of its own, which a
// caller gone meanwhile does not cancel. The node cache batches heartbeats in front of this.
func (p *Store) TouchNode(ctx context.Context, key didkey.PublicKey, seen time.Time) error {
	n, err := p.touch(context.WithoutCancel(ctx), [][]byte{key[:]}, []int64{seen.UnixNano()}, true)
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// touch logs that keys[i] was seen at seen[i] (unix nanoseconds), in one statement, and
// returns the log rows it wrote. The statement writes no node's row: it appends the keys
// and times to the flush log, one row per bucket of keys (a key's first byte), which the
// other daemons follow and which fold later moves into svrp_node_seen. A read of last_seen
// takes the later of the liveness row and the log, so the order in which daemons' flushes
// land does not matter, and one statement outside any SERIALIZABLE transaction is enough.
// With known, only keys that have a record are logged, for TouchNode's answer; a flush of
// the node cache, which holds only keys with records, skips the lookup.
func (p *Store) touch(ctx context.Context, keys [][]byte, seen []int64, known bool) (int64, error) {
	sql := `INSERT INTO svrp_node_touches (xid, at, bucket, keys, seen)
		SELECT pg_current_xact_id()::text::bigint, $3, get_byte(u.key, 0), array_agg(u.key), array_agg(u.seen)
		FROM unnest($1::bytea[], $2::bigint[]) AS u(key, seen) WHERE u.key <> ''`
	if known {
		sql += ` AND EXISTS (SELECT 1 FROM svrp_nodes AS n WHERE n.key = u.key)`
	}
	sql += ` GROUP BY 3`
	for attempt := 1; ; attempt++ {
		tag, err := p.pool.Exec(ctx, sql, keys, seen, time.Now().Unix())
		if err == nil {
			return tag.RowsAffected(), nil
		}
		if !retryable(err) || attempt == maxPostgresAttempts {
			return 0, unavailable(fmt.Errorf("store: recording heartbeats: %w", err))
		}
	}
}

// touchBuckets is the number of buckets of the flush log: a key's bucket is its first byte.
// A read of one node's last_seen reads its bucket's share of the log, and a flush writes one
// row per bucket it has keys in, so that a flush of thousands of heartbeats is a few hundred
// rows.
const touchBuckets = 256

// foldLog folds the flush log (fold) when its oldest row has waited foldEvery beyond
// touchKept, taking every row older than touchKept, so that a fold takes in at least
// foldEvery of heartbeats: several of each node's.
func (p *Store) foldLog(ctx context.Context) error {
	var oldest *int64
	if err := p.pool.QueryRow(ctx, `SELECT min(at) FROM svrp_node_touches`).Scan(&oldest); err != nil {
		return fmt.Errorf("store: reading the heartbeat log: %w", err)
	}
	now := time.Now()
	if oldest == nil || *oldest >= now.Add(-touchKept-foldEvery).Unix() {
		return nil
	}
	_, err := p.fold(ctx, now.Add(-touchKept).Unix())
	return err
}

// fold moves the heartbeats logged before the unix second before into svrp_node_seen, the
// latest of each key, and deletes their log rows: one row update per node a fold, however
// many times it beat. It takes one bucket a statement, so that a registration, whose write
// of a liveness row waits for a fold holding it, waits for one bucket's share at most. Two
// folds at once are correct, if wasteful: the second finds the rows the first deleted gone.
// It returns the rows it wrote, log rows deleted and liveness rows updated.
func (p *Store) fold(ctx context.Context, before int64) (int64, error) {
	var wrote int64
	for b := range touchBuckets {
		var deleted, updated int64
		err := p.pool.QueryRow(ctx, `WITH gone AS (
				DELETE FROM svrp_node_touches WHERE bucket = $1 AND at < $2 RETURNING keys, seen
			), latest AS (
				SELECT u.key, max(u.seen) AS seen FROM gone, unnest(gone.keys, gone.seen) AS u(key, seen) GROUP BY u.key
			), folded AS (
				UPDATE svrp_node_seen AS s SET seen = l.seen FROM latest AS l WHERE s.key = l.key AND l.seen > s.seen
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM folded)`, b, before).Scan(&deleted, &updated)
		if err != nil {
			return wrote, fmt.Errorf("store: folding the heartbeat log: %w", err)
		}
		wrote += deleted + updated
	}
	return wrote, nil
}

// reseed gives every node without a liveness row one at now, and puts back the sentinel
// row, when the sentinel is missing: the server truncates an unlogged table in its recovery
// from a crash. Until every node heartbeats again, the moment of the reseed is the best
// known floor of its last_seen that does not make a live node look gone for long enough to
// be expired or lose its binding (see the Store's documentation). Several daemons may
// reseed at once; each row is written once.
func (p *Store) reseed(ctx context.Context) error {
	var ok bool
	if err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM svrp_node_seen WHERE key = '')`).Scan(&ok); err != nil {
		return fmt.Errorf("store: reading the liveness table: %w", err)
	}
	if ok {
		return nil
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO svrp_node_seen (key, seen)
		SELECT key, $1::bigint FROM svrp_nodes UNION ALL SELECT ''::bytea, 0
		ON CONFLICT (key) DO NOTHING`, time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("store: reseeding the liveness table: %w", err)
	}
	return nil
}

// nodeFrom decodes a node row: the record, and last_seen moved to the node's liveness row
// when that is later.
func nodeFrom(rec []byte, touched *int64) (store.Node, error) {
	n, err := nodecodec.Decode(rec)
	if err != nil {
		return store.Node{}, fmt.Errorf("store: failed to decode a node record: %w", err)
	}
	if touched != nil {
		if seen := time.Unix(0, *touched).UTC(); seen.After(n.LastSeen) {
			n.LastSeen = seen
		}
	}
	return n, nil
}

func (t *pgTx) Node(k didkey.PublicKey) (store.Node, error) {
	if err := t.Readable(); err != nil {
		return store.Node{}, err
	}
	var rec []byte
	var touched *int64
	// The log's share read is the key's bucket, each row of which is searched for the key
	// by array_positions, a scan in the server's own code, where unnest would make a row of
	// every element.
	err := t.tx.QueryRow(t.ctx, `SELECT n.rec, GREATEST(s.seen,
			(SELECT max(t.seen[i]) FROM svrp_node_touches AS t, unnest(array_positions(t.keys, $1)) AS i
				WHERE t.bucket = get_byte($1, 0)))
		FROM svrp_nodes AS n LEFT JOIN svrp_node_seen AS s ON s.key = n.key WHERE n.key = $1`, k[:]).Scan(&rec, &touched)
	if err := t.check(err); err != nil {
		return store.Node{}, err
	}
	return nodeFrom(rec, touched)
}

func (t *pgTx) PutNode(n store.Node) error {
	_, err := t.PutNodeRevision(n)
	return err
}

func (t *pgTx) NodeKeyByDID(did string) (didkey.PublicKey, error) {
	if err := t.Readable(); err != nil {
		return didkey.PublicKey{}, err
	}
	if did == "" {
		return didkey.PublicKey{}, store.ErrNotFound
	}
	var k []byte
	err := t.tx.QueryRow(t.ctx, `SELECT key FROM svrp_nodes WHERE did = $1 ORDER BY did_seq DESC LIMIT 1`, []byte(did)).Scan(&k)
	if err := t.check(err); err != nil {
		return didkey.PublicKey{}, err
	}
	return keyFrom(k)
}

func (t *pgTx) NodeKeysByShortBody(body string) ([]didkey.PublicKey, error) {
	if err := t.Readable(); err != nil {
		return nil, err
	}
	return t.keys(`SELECT key FROM svrp_nodes WHERE short_body = $1 ORDER BY key`, body)
}

func (t *pgTx) EachNode(fn func(store.Node) error) error {
	// The log is read once a page, for the buckets the page's keys span.
	return page(t, `WITH p AS (SELECT n.key, n.rec, s.seen FROM svrp_nodes AS n LEFT JOIN svrp_node_seen AS s ON s.key = n.key
			WHERE n.key > $1 ORDER BY n.key LIMIT $2),
		l AS (SELECT u.key, max(u.seen) AS seen FROM svrp_node_touches AS t, unnest(t.keys, t.seen) AS u(key, seen)
			WHERE t.bucket BETWEEN (SELECT min(get_byte(key, 0)) FROM p) AND (SELECT max(get_byte(key, 0)) FROM p)
			AND u.key IN (SELECT key FROM p) GROUP BY u.key)
		SELECT p.key, p.rec, GREATEST(p.seen, l.seen) FROM p LEFT JOIN l ON l.key = p.key ORDER BY p.key`, []any{[]byte{}},
		func(r pgx.Rows) ([]any, store.Node, error) {
			var k, rec []byte
			var touched *int64
			if err := r.Scan(&k, &rec, &touched); err != nil {
				return nil, store.Node{}, t.check(err)
			}
			n, err := nodeFrom(rec, touched)
			return []any{k}, n, err
		}, fn)
}

func (t *pgTx) NodeCount() (int, error) {
	if err := t.Readable(); err != nil {
		return 0, err
	}
	var n int
	err := t.tx.QueryRow(t.ctx, `SELECT count(*) FROM svrp_nodes`).Scan(&n)
	return n, t.check(err)
}

// DeleteNode deletes the row and leaves its revision in svrp_node_deletions, for the feed
// (NodeChanges) and for the key's next registration.
func (t *pgTx) DeleteNode(k didkey.PublicKey) error {
	if err := t.Writable(); err != nil {
		return err
	}
	_, err := t.tx.Exec(t.ctx, `WITH d AS (DELETE FROM svrp_nodes WHERE key = $1 RETURNING key, rev),
			s AS (DELETE FROM svrp_node_seen WHERE key = $1)
		INSERT INTO svrp_node_deletions (key, rev, xid, deleted_at)
			SELECT key, rev, pg_current_xact_id()::text::bigint, $2 FROM d
		ON CONFLICT (key) DO UPDATE SET rev = EXCLUDED.rev, xid = EXCLUDED.xid, deleted_at = EXCLUDED.deleted_at`,
		k[:], time.Now().Unix())
	return t.check(err)
}

// NodeFeed implements [store.NodeFollower]: other daemons write the node table too.
func (p *Store) NodeFeed() store.NodeFeed { return p }

// ScanNodes implements [store.NodeScanner] with a View.
func (p *Store) ScanNodes(ctx context.Context, fn func(*store.Node) error) error {
	return store.ScanNodesInView(ctx, p, fn)
}

// NodeChanges implements [store.NodeFeed]. mark is the oldest transaction id whose writes the caller
// may not have seen: every row written by a transaction at or after it is read again. The
// next mark is the xmin of this read's snapshot, the oldest transaction still running when
// it was taken, so a transaction that commits after this read but started before it is read
// next time. Rows read twice are told apart by their revision. Heartbeats come from the
// flush log, keys and times only; a first read (mark 0) reads the whole log, which holds
// the heartbeats not yet folded into the records' liveness rows. A read that finds the
// liveness table emptied by a crash reseeds it.
func (p *Store) NodeChanges(ctx context.Context, mark int64, fn func(n store.Node, rev uint64), gone func(key didkey.PublicKey, rev uint64), seen func(key didkey.PublicKey, at time.Time)) (int64, error) {
	next := mark
	var kept bool
	err := pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint,
			EXISTS (SELECT 1 FROM svrp_node_seen WHERE key = '')`).Scan(&next, &kept); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT n.rec, s.seen, n.rev FROM svrp_nodes AS n
			LEFT JOIN svrp_node_seen AS s ON s.key = n.key WHERE n.xid >= $1`, mark)
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
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT d.key, d.rev FROM svrp_node_deletions AS d
			WHERE d.xid >= $1 AND NOT EXISTS (SELECT 1 FROM svrp_nodes AS n WHERE n.key = d.key)`, mark)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			var rev int64
			if err := rows.Scan(&k, &rev); err != nil {
				return err
			}
			key, err := keyFrom(k)
			if err != nil {
				return err
			}
			gone(key, uint64(rev))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return followTouches(ctx, tx, mark, seen)
	})
	if err != nil {
		return mark, fmt.Errorf("store: reading node changes: %w", err)
	}
	if !kept {
		// The records just read carried no liveness rows; memory keeps the later times it
		// holds, and the next read has the reseeded ones.
		if err := p.reseed(ctx); err != nil {
			return mark, err
		}
	}
	return next, nil
}

// followTouches calls seen with each heartbeat of the flushes logged since mark.
func followTouches(ctx context.Context, tx pgx.Tx, mark int64, seen func(didkey.PublicKey, time.Time)) error {
	rows, err := tx.Query(ctx, `SELECT keys, seen FROM svrp_node_touches WHERE xid >= $1`, mark)
	if err != nil {
		return err
	}
	defer rows.Close()
	var keys [][]byte
	var times []int64
	for rows.Next() {
		if err := rows.Scan(&keys, &times); err != nil {
			return err
		}
		if len(keys) != len(times) {
			return fmt.Errorf("store: a heartbeat flush logs %d keys for %d times", len(keys), len(times))
		}
		for i, k := range keys {
			key, err := keyFrom(k)
			if err != nil {
				return err
			}
			seen(key, time.Unix(0, times[i]).UTC())
		}
	}
	return rows.Err()
}

// TouchNodes implements [store.NodeFeed], in one statement.
func (p *Store) TouchNodes(ctx context.Context, keys []didkey.PublicKey, seen []time.Time) error {
	ks := make([][]byte, len(keys))
	ns := make([]int64, len(keys))
	for i := range keys {
		ks[i] = keys[i][:]
		ns[i] = seen[i].UnixNano()
	}
	_, err := p.touch(ctx, ks, ns, false)
	return err
}

// WriteTouchedNode is PutNode: a row's write costs the same with or without its index
// columns.
func (t *pgTx) WriteTouchedNode(n store.Node) error { return t.PutNode(n) }

// PutNodeRevision returns the row's new revision, for the node cache. did_seq moves
// only when the DID changes, so that of two records with one DID the lookup finds the one
// that took it last, as the other stores do.
func (t *pgTx) PutNodeRevision(n store.Node) (uint64, error) {
	if err := t.Writable(); err != nil {
		return 0, err
	}
	var rev int64
	err := t.tx.QueryRow(t.ctx, `WITH s AS (INSERT INTO svrp_node_seen (key, seen) VALUES ($1, $5)
			ON CONFLICT (key) DO UPDATE SET seen = EXCLUDED.seen)
		INSERT INTO svrp_nodes (key, did, did_seq, short_body, rec, rev, xid)
		VALUES ($1, $2, nextval('svrp_put_seq'), $3, $4,
			COALESCE((SELECT d.rev FROM svrp_node_deletions AS d WHERE d.key = $1), 0) + 1,
			pg_current_xact_id()::text::bigint)
		ON CONFLICT (key) DO UPDATE SET
			did = EXCLUDED.did,
			did_seq = CASE WHEN svrp_nodes.did = EXCLUDED.did THEN svrp_nodes.did_seq ELSE EXCLUDED.did_seq END,
			rec = EXCLUDED.rec, rev = svrp_nodes.rev + 1, xid = EXCLUDED.xid
		RETURNING rev`,
		n.Key[:], []byte(n.DID), n.Key.ShortBody(), nodecodec.Append(nil, n), n.LastSeen.UnixNano()).Scan(&rev)
	return uint64(rev), t.check(err)
}
