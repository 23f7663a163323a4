package postgres

import (
	"context"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// benchVacuumed names the tables besides svrp_nodes that heartbeat flushes write.
const benchVacuumed = `svrp_node_seen, svrp_node_touches`

// benchFollow reads the feed from mark as a following daemon does, calling count for each
// heartbeat or record it reads.
func benchFollow(ctx context.Context, p *Store, mark int64, count func()) (int64, error) {
	return p.NodeChanges(ctx, mark, func(store.Node, uint64) { count() }, func(didkey.PublicKey, uint64) {},
		func(didkey.PublicKey, time.Time) { count() })
}

// benchFillBeside gives each node of a filled table its liveness row.
func benchFillBeside(ctx context.Context, p *Store, now time.Time) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO svrp_node_seen (key, seen) SELECT key, $1::bigint FROM svrp_nodes ON CONFLICT (key) DO NOTHING`, now.UnixNano())
	return err
}

// benchFoldRounds is how many flushes of a second a fold takes in at least.
const benchFoldRounds = int(foldEvery / time.Second)

// benchFold folds the whole flush log, and returns the rows it wrote.
func benchFold(ctx context.Context, p *Store) (int64, error) {
	return p.fold(ctx, time.Now().Add(time.Hour).Unix())
}

// benchFlushWrites is the fewest rows the statistics count for flushes of rows heartbeats:
// a log row each.
func benchFlushWrites(flushes, rows int) int64 { return int64(flushes) }
