package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgConn is the connection of one transaction. It is taken from the pool at the
// transaction's first statement, and the BEGIN is sent in one pipeline with that statement:
// a transaction costs one round trip less than BEGIN on its own would, and one that sends
// nothing (a View served by the node cache, an Update refused before any write) costs the
// database nothing.
type pgConn struct {
	pool  *pgxpool.Pool
	begin string // the transaction's BEGIN
	conn  *pgxpool.Conn
	open  bool // BEGIN was sent; the transaction must be ended
}

const (
	beginView   = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	beginUpdate = "BEGIN ISOLATION LEVEL SERIALIZABLE"
)

// first sends the BEGIN and the first statement in one pipeline and returns their results,
// BEGIN's already read.
func (c *pgConn) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	c.conn, c.open = conn, true
	b := &pgx.Batch{}
	b.Queue(c.begin)
	b.Queue(sql, args...)
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (c *pgConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.conn != nil {
		return c.conn.Exec(ctx, sql, args...)
	}
	br, err := c.first(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (c *pgConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.conn != nil {
		return c.conn.Query(ctx, sql, args...)
	}
	br, err := c.first(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (c *pgConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.conn != nil {
		return c.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := c.Query(ctx, sql, args...)
	return firstRow{rows, err}
}

// commit commits the transaction, if it began.
func (c *pgConn) commit(ctx context.Context) error {
	if !c.open {
		return nil
	}
	tag, err := c.conn.Exec(ctx, "COMMIT")
	c.open = false
	if err != nil {
		return err
	}
	// COMMIT of a transaction that failed rolls it back.
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// release rolls back what was not committed and gives the connection back to the pool,
// which closes it rather than reuse it if the rollback failed.
func (c *pgConn) release(ctx context.Context) {
	if c.conn == nil {
		return
	}
	if c.open {
		c.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		c.open = false
	}
	c.conn.Release()
	c.conn = nil
}

// batchRows are the rows of a transaction's first statement: the pipeline is closed with
// them, so that the connection is free for the next statement.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error // closing the pipeline's
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.closeBatch()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.closeBatch()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) closeBatch() {
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

// firstRow is QueryRow's answer made of Query's, scanned as pgx scans a row: the first
// one, or pgx.ErrNoRows.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
