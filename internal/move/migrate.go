package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/postgres"
)

// ExitNotEmpty is the exit code of a migrate or restore refused because its target holds
// data already.
const ExitNotEmpty = 3

// isPostgres reports whether a location names a PostgreSQL database rather than a
// directory.
func isPostgres(loc string) bool {
	return strings.HasPrefix(loc, "postgres://") || strings.HasPrefix(loc, "postgresql://")
}

// open opens the store at loc: a PostgreSQL URL, or a Badger data directory.
func open(ctx context.Context, loc string) (store.Store, error) {
	if isPostgres(loc) {
		return postgres.Open(ctx, loc)
	}
	abs, err := filepath.Abs(loc)
	if err != nil {
		return nil, err
	}
	st, err := badger.Open(abs)
	if errors.Is(err, badger.ErrLocked) {
		return nil, fmt.Errorf("%w: stop the daemon that uses it first (a Badger directory is open to one process at a time)", err)
	}
	return st, err
}

// describe names a location for a log line without a URL's password.
func describe(loc string) string {
	if !isPostgres(loc) {
		return "badger " + loc
	}
	if i := strings.LastIndex(loc, "@"); i >= 0 {
		scheme, _, _ := strings.Cut(loc, "://")
		return "postgres " + scheme + "://…" + loc[i:]
	}
	return "postgres " + loc
}

// Migrate is "svrpd migrate": it copies every record from one store to another, empty one,
// and verifies the counts. It returns 0 after a verified copy, 1 after a failure,
// ExitNotEmpty when the target holds data, and 2 after a usage error.
func Migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("migrate", stderr)
	from := fs.String("from", "", "the store to copy: a Badger data directory (its daemon stopped) or a PostgreSQL URL")
	to := fs.String("to", "", "the store to fill, which must be empty: a PostgreSQL URL or a Badger data directory (created if absent)")
	cmdflag.SetUsage(fs, "Usage: svrpd migrate --from <data dir or postgres URL> --to <postgres URL or data dir>",
		"Copies nodes (with their signatures), binding sessions, active bindings, revocations, operator sessions still live and counters, then reads the target back and compares the counts. Stop the daemon of a Badger source first; a PostgreSQL source may keep serving, and the copy is the database as it was when the copy began (heartbeat times daemons had not flushed yet excepted).",
		fmt.Sprintf("Exit status: 0 copied and verified, 1 failed, 2 bad usage, %d the target is not empty.", ExitNotEmpty))
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if *from == "" || *to == "" {
		fmt.Fprintln(stderr, "svrpd migrate: both --from and --to are needed")
		return 2
	}
	if *from == *to {
		fmt.Fprintln(stderr, "svrpd migrate: --from and --to name the same store")
		return 2
	}
	if !isPostgres(*from) {
		if _, err := os.Stat(filepath.Join(*from, "MANIFEST")); err != nil {
			fmt.Fprintf(stderr, "svrpd migrate: --from %s is not a data directory: %v\n", *from, err)
			return 1
		}
	}
	src, err := open(ctx, *from)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd migrate: opening the source: %v\n", err)
		return 1
	}
	defer src.Close()
	dst, err := open(ctx, *to)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd migrate: opening the target: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "migrate: from %s to %s\n", describe(*from), describe(*to))
	start := time.Now()
	counts, err := Copy(ctx, src, dst, stdout)
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the target: %w", cerr)
	}
	switch {
	case errors.Is(err, ErrTargetNotEmpty):
		fmt.Fprintf(stderr, "svrpd migrate: %v; nothing was written\n", err)
		return ExitNotEmpty
	case err != nil:
		fmt.Fprintf(stderr, "svrpd migrate: %v\nsvrpd migrate: the target may hold part of the copy; empty it before trying again\n", err)
		return 1
	}
	for _, c := range counts {
		fmt.Fprintf(stdout, "verified %s: %d in the source, %d in the target\n", c.Kind, c.Source, c.Target)
	}
	fmt.Fprintf(stdout, "migrate: done in %v\n", time.Since(start).Round(time.Millisecond))
	return 0
}
