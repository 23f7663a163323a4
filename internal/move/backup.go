package move

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// BackupPath is where a daemon serves its backup, on its --debug-listen address.
const BackupPath = "/backup"

// Backup is "svrpd backup": a consistent backup of a Badger store to a file, taken from a
// running daemon (through its loopback debug listener) or from a data directory no daemon
// has open. It returns 0 after a complete backup, 1 after a failure and 2 after a usage
// error; a failed backup leaves no file.
func Backup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("backup", stderr)
	data := fs.String("data", "", "back up this Badger data directory, which no daemon may have open")
	daemon := fs.String("daemon", "", "back up the running daemon whose --debug-listen is this loopback host:port")
	out := fs.String("out", "", "the file to write; it must not exist")
	cmdflag.SetUsage(fs, "Usage: svrpd backup (--daemon 127.0.0.1:PORT | --data DIR) --out FILE",
		"Writes the whole registry as it was at one instant, while writes go on: from a running daemon through GET "+BackupPath+" on its --debug-listen address (the daemon first makes its heartbeat times durable), or from a stopped daemon's data directory. Restore it with svrpd restore. A PostgreSQL registry is backed up with pg_dump.")
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	switch {
	case *out == "":
		fmt.Fprintln(stderr, "svrpd backup: --out is needed")
		return 2
	case (*data == "") == (*daemon == ""):
		fmt.Fprintln(stderr, "svrpd backup: give one of --daemon and --data")
		return 2
	case isPostgres(*data):
		fmt.Fprintln(stderr, "svrpd backup: a PostgreSQL registry is backed up with pg_dump (or copied with svrpd migrate --to DIR)")
		return 2
	}
	start := time.Now()
	var n int64
	err := writeFile(*out, func(w io.Writer) (err error) {
		cw := &countingWriter{w: w}
		if *daemon != "" {
			err = backupDaemon(ctx, *daemon, cw)
		} else {
			err = backupDir(ctx, *data, cw)
		}
		n = cw.n
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "svrpd backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup: %d bytes written to %s in %v\n", n, *out, time.Since(start).Round(time.Millisecond))
	return 0
}

func backupDir(ctx context.Context, dir string, w io.Writer) error {
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return fmt.Errorf("%s is not a data directory: %w", dir, err)
	}
	s, err := badger.Open(dir)
	if errors.Is(err, badger.ErrLocked) {
		return fmt.Errorf("%w: a running daemon is backed up with --daemon and its --debug-listen address", err)
	}
	if err != nil {
		return err
	}
	return errors.Join(badger.Backup(ctx, s, w), s.Close())
}

func backupDaemon(ctx context.Context, addr string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+BackupPath, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		err := fmt.Errorf("the daemon answered %s: %s", resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode == http.StatusNotFound {
			// The API address answers every unknown path so; only the debug listener serves
			// the backup.
			err = fmt.Errorf("%w\nhint: %s serves no backup: give --daemon the address the daemon's --debug-listen names, not its API address", err, addr)
		}
		return err
	}
	// The daemon aborts the response on a failure: a backup cut short fails here rather
	// than leaving a file that restores part of the registry.
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the backup: %w", err)
	}
	return nil
}

// BackupHandler serves a backup of a daemon's Badger store, inner, under the node cache
// s: the heartbeat times the cache keeps in memory are made durable first, so that the
// backup holds every write acknowledged before the request.
func BackupHandler(s, inner store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.Flush(r.Context()); err != nil {
			http.Error(w, "heartbeat times could not be made durable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		err := badger.Backup(r.Context(), inner, w)
		switch {
		case errors.Is(err, badger.ErrNotBadger):
			http.Error(w, "this daemon's store is not Badger: back up PostgreSQL with pg_dump", http.StatusNotImplemented)
		case err != nil:
			// Cut the response short, so that the client sees a failure, not a short file.
			panic(http.ErrAbortHandler)
		}
	})
}

// Restore is "svrpd restore": it fills an empty data directory from a backup file and
// reports what it holds. It returns 0 after a restore, 1 after a failure, ExitNotEmpty when
// the directory holds files, and 2 after a usage error.
func Restore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cmdflag.New("restore", stderr)
	data := fs.String("data", "", "the data directory to fill; absent or empty")
	in := fs.String("in", "", "the backup file, as svrpd backup wrote it")
	cmdflag.SetUsage(fs, "Usage: svrpd restore --in FILE --data DIR",
		"Fills an empty data directory from a backup, then counts what it holds. Start the daemon on it with --data DIR; move it to PostgreSQL with svrpd migrate.",
		fmt.Sprintf("Exit status: 0 restored, 1 failed, 2 bad usage, %d the directory is not empty.", ExitNotEmpty))
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if *data == "" || *in == "" {
		fmt.Fprintln(stderr, "svrpd restore: both --in and --data are needed")
		return 2
	}
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd restore: %v\n", err)
		return 1
	}
	defer f.Close()
	start := time.Now()
	err = badger.Restore(ctx, *data, f)
	switch {
	case errors.Is(err, badger.ErrNotEmpty):
		fmt.Fprintf(stderr, "svrpd restore: %v; nothing was written\n", err)
		return ExitNotEmpty
	case err != nil:
		fmt.Fprintf(stderr, "svrpd restore: %v\n", err)
		return 1
	}
	s, err := open(ctx, *data)
	if err != nil {
		fmt.Fprintf(stderr, "svrpd restore: reopening the restored directory: %v\n", err)
		return 1
	}
	counts, err := Counts(ctx, s)
	if err = errors.Join(err, s.Close()); err != nil {
		fmt.Fprintf(stderr, "svrpd restore: reading the restored directory: %v\n", err)
		return 1
	}
	for _, c := range counts {
		fmt.Fprintf(stdout, "restored %s: %d\n", c.Kind, c.Source)
	}
	fmt.Fprintf(stdout, "restore: done in %v\n", time.Since(start).Round(time.Millisecond))
	return 0
}

// Counts is how many records of each kind s holds, as a copy would carry them now.
func Counts(ctx context.Context, s store.Store) ([]Count, error) {
	now := time.Now()
	out := make([]Count, len(kinds))
	err := s.View(ctx, func(tx store.Tx) error {
		for i, k := range kinds {
			n, err := count(tx, k, now)
			if err != nil {
				return err
			}
			out[i] = Count{Kind: k.name, Source: n}
		}
		return nil
	})
	return out, err
}

// writeFile writes path through fill, which must not exist, and only when fill succeeds:
// it writes a temporary file beside it, syncs it and renames it.
func writeFile(path string, fill func(io.Writer) error) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists already", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	err = fill(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
