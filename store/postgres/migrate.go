package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions: migrations[i] takes the schema from version i to
// i+1. A migration is never edited once released; a change is a new one.
var migrations = []string{
	`CREATE TABLE svrp_schema (version integer NOT NULL);
	INSERT INTO svrp_schema VALUES (0);
	CREATE SEQUENCE svrp_put_seq;
	CREATE TABLE svrp_nodes (
		key bytea PRIMARY KEY,
		did bytea NOT NULL,
		did_seq bigint NOT NULL,
		short_body text NOT NULL,
		rec bytea NOT NULL,
		touched bigint,
		rev bigint NOT NULL,
		xid bigint NOT NULL
	);
	CREATE INDEX svrp_nodes_did ON svrp_nodes (did, did_seq);
	CREATE INDEX svrp_nodes_short_body ON svrp_nodes (short_body);
	CREATE INDEX svrp_nodes_xid ON svrp_nodes (xid);
	CREATE TABLE svrp_binding_sessions (
		id bytea PRIMARY KEY,
		node_key bytea NOT NULL,
		code_hash bytea,
		token_hash bytea,
		put_seq bigint NOT NULL,
		rec bytea NOT NULL
	);
	CREATE INDEX svrp_binding_sessions_node ON svrp_binding_sessions (node_key, id);
	CREATE INDEX svrp_binding_sessions_code ON svrp_binding_sessions (code_hash);
	CREATE INDEX svrp_binding_sessions_token ON svrp_binding_sessions (token_hash);
	CREATE TABLE svrp_bindings (
		node_key bytea PRIMARY KEY,
		operator_did bytea NOT NULL,
		rec bytea NOT NULL
	);
	CREATE INDEX svrp_bindings_operator ON svrp_bindings (operator_did, node_key);
	CREATE TABLE svrp_operator_sessions (token_hash bytea PRIMARY KEY, rec bytea NOT NULL);
	CREATE TABLE svrp_counters (key bytea PRIMARY KEY, rec bytea NOT NULL);
	CREATE TABLE svrp_used_challenges (id bytea PRIMARY KEY, expires_at bigint NOT NULL);
	CREATE INDEX svrp_used_challenges_expiry ON svrp_used_challenges (expires_at);
	CREATE TABLE svrp_secrets (name text PRIMARY KEY, value bytea NOT NULL);`,

	// 2: the revocation list, with its size kept in a row of its own so that counting it
	// costs one read.
	`CREATE TABLE svrp_revocations (
		operator_did bytea NOT NULL,
		revocation_id bytea NOT NULL,
		rec bytea NOT NULL,
		PRIMARY KEY (operator_did, revocation_id)
	);
	CREATE TABLE svrp_revocation_count (n bigint NOT NULL);
	INSERT INTO svrp_revocation_count VALUES (0);`,

	// 3: a node key's open sessions are found without reading its history, and a deleted
	// session leaves the hash of its id behind so that the id is never given out again.
	`ALTER TABLE svrp_binding_sessions ADD COLUMN open boolean NOT NULL DEFAULT true;
	DROP INDEX svrp_binding_sessions_node;
	CREATE INDEX svrp_binding_sessions_open ON svrp_binding_sessions (node_key, id) WHERE open;
	CREATE TABLE svrp_used_session_ids (id_hash bytea PRIMARY KEY);`,

	// 4: bearer sessions by operator, so that a revocation finds its sessions at once.
	`ALTER TABLE svrp_operator_sessions ADD COLUMN operator_did bytea NOT NULL DEFAULT '';
	UPDATE svrp_operator_sessions SET operator_did = convert_to(convert_from(rec, 'UTF8')::jsonb->>'operator_did', 'UTF8');
	CREATE INDEX svrp_operator_sessions_operator ON svrp_operator_sessions (operator_did, token_hash);`,

	// 5: operator DID bodies pinned to their root keys (pins.go).
	`CREATE TABLE svrp_operator_pins (body bytea PRIMARY KEY, rec bytea NOT NULL);`,
	// 6: node records are deleted (expired or displaced); a deletion leaves a row for the
	// node caches of the other daemons to follow, with the revision the record had, so that
	// the key's revisions go on growing if it registers again.
	`CREATE TABLE svrp_node_deletions (
		key bytea PRIMARY KEY,
		rev bigint NOT NULL,
		xid bigint NOT NULL,
		deleted_at bigint NOT NULL
	);
	CREATE INDEX svrp_node_deletions_xid ON svrp_node_deletions (xid);
	CREATE INDEX svrp_node_deletions_at ON svrp_node_deletions (deleted_at);`,

	// 7: the transparency log (translog.go): its entries, its Merkle hashes, and its size in
	// a row of its own, which every append reads and moves, so that two appends from any two
	// daemons conflict and one runs again: the log has one order.
	`CREATE TABLE svrp_log_entries (idx bigint PRIMARY KEY, entry bytea NOT NULL);
	CREATE TABLE svrp_log_hashes (idx bigint PRIMARY KEY, hash bytea NOT NULL);
	CREATE TABLE svrp_log_size (n bigint NOT NULL);
	INSERT INTO svrp_log_size VALUES (0);`,

	// 8: liveness out of the node row (nodes.go, touch). A heartbeat flush rewrote each node
	// row and its index entries, since the indexed xid moved with it. last_seen moves to a
	// narrow table with one index, on the key, so that a flush's updates are HOT; the other
	// daemons follow the flushes in a log of keys and times. Both tables are UNLOGGED: they
	// write no WAL, and a crash empties them, which the sentinel row (key '') lets a
	// daemon notice and repair (reseed).
	`CREATE UNLOGGED TABLE svrp_node_seen (key bytea PRIMARY KEY, seen bigint NOT NULL) WITH (fillfactor = 80);
	INSERT INTO svrp_node_seen (key, seen)
		SELECT key, COALESCE(touched, 0) FROM svrp_nodes UNION ALL SELECT ''::bytea, 0;
	ALTER TABLE svrp_nodes DROP COLUMN touched;
	CREATE UNLOGGED TABLE svrp_node_touches (xid bigint NOT NULL, at bigint NOT NULL, keys bytea[] NOT NULL, seen bigint[] NOT NULL);
	CREATE INDEX svrp_node_touches_xid ON svrp_node_touches (xid);`,

	// 9: a heartbeat flush only appends to the flush log, one row per bucket of keys (the
	// key's first byte), and the log is folded into svrp_node_seen every few minutes
	// (nodes.go, fold): one row update a node per fold instead of one per heartbeat. The
	// log's rows so far are in svrp_node_seen already. A row of the log stays in its page
	// up to a page's size, uncompressed, since keys and times do not compress. A read of the
	// log is never planned in parallel: a read of one node's bucket takes a millisecond,
	// and the workers, planned on an estimate of the log's size that the fold makes stale,
	// took hundreds.
	`TRUNCATE svrp_node_touches;
	ALTER TABLE svrp_node_touches ADD COLUMN bucket smallint NOT NULL,
		ALTER COLUMN keys SET STORAGE EXTERNAL, ALTER COLUMN seen SET STORAGE EXTERNAL,
		SET (toast_tuple_target = 8160, parallel_workers = 0);
	CREATE INDEX svrp_node_touches_bucket ON svrp_node_touches (bucket, at);
	CREATE INDEX svrp_node_touches_at ON svrp_node_touches (at);`,
}

// SchemaVersion is the schema version this build migrates to.
var SchemaVersion = len(migrations)

func (p *Store) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 0`); err != nil {
			return fmt.Errorf("store: migrating the schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("store: locking the schema for migration: %w", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('svrp_schema') IS NOT NULL`).Scan(&exists); err != nil {
			return fmt.Errorf("store: reading the schema version: %w", err)
		}
		version := 0
		if exists {
			if err := tx.QueryRow(ctx, `SELECT version FROM svrp_schema`).Scan(&version); err != nil {
				return fmt.Errorf("store: reading the schema version: %w", err)
			}
		}
		if version > len(migrations) {
			return fmt.Errorf("store: the database has schema version %d, newer than this build's %d; run a newer svrpd", version, len(migrations))
		}
		for v := version; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("store: migrating the schema to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE svrp_schema SET version = $1`, v+1); err != nil {
				return fmt.Errorf("store: migrating the schema to version %d: %w", v+1, err)
			}
		}
		return nil
	})
}
