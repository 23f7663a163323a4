package badger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/store"
)

// backupHeader starts every backup file: it names the format and the key layout's version,
// so that a restore refuses a file of another program or another layout before it writes
// anything.
const backupHeader = "svrpd badger backup, layout " + schemaVersion + "\n"

// ErrNotBadger is a backup asked of a store that is not a Badger store.
var ErrNotBadger = errors.New("store: not a Badger store")

// ErrNotBackup is a restore from a file that is not a backup of this layout.
var ErrNotBackup = errors.New("not a svrpd Badger backup of this version")

// ErrNotEmpty is a restore into a directory that holds files already.
var ErrNotEmpty = errors.New("the directory is not empty")

// Backup writes a backup of s, a store opened by [Open], to w: a header, then Badger's own
// backup stream of the latest version of every key as of one read timestamp, so that the
// file is the database as it was at one instant while writes go on. Every Update that
// returned before Backup was called is in it.
func Backup(ctx context.Context, s store.Store, w io.Writer) error {
	b, ok := s.(*badgerStore)
	if !ok {
		return ErrNotBadger
	}
	if b.closed.Load() {
		return store.ErrClosed
	}
	if _, err := io.WriteString(w, backupHeader); err != nil {
		return err
	}
	// Badger's stream has no context: a cancelled ctx stops it at its next write.
	_, err := b.db.Backup(ctxWriter{ctx, w}, 0)
	return err
}

type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Restore fills dir, which must be absent or empty, from a backup written by [Backup], and
// leaves it closed, ready for a daemon to open.
func Restore(ctx context.Context, dir string, r io.Reader) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: %w", dir, ErrNotEmpty)
	}
	br := bufio.NewReader(r)
	head := make([]byte, len(backupHeader))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != backupHeader {
		return ErrNotBackup
	}
	// Badger itself, with its own compactors: the store's Open leaves compaction to its
	// commits, which a Load does not go through, so a large Load would stall on level 0.
	// Load wants no other transaction running, and nothing else has the database.
	db, err := openBadgerDB(dgbadger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil).
		WithMetricsEnabled(false).WithValueLogFileSize(badgerValueLogFileSize))
	if err != nil {
		return err
	}
	err = db.Load(ctxReader{ctx, br}, loadPending)
	return errors.Join(err, db.Close())
}

// loadPending bounds the writes Load keeps in flight.
const loadPending = 256

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
