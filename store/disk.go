package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Health is what a store that watches its disk says about it.
type Health struct {
	// State is one of HealthOK, HealthLowSpace, HealthGone and HealthReadOnly.
	State string
	// Detail says why, in words for an operator; it names no path.
	Detail string
}

// States of [Health]. Every state but HealthOK refuses writes with [ErrUnavailable].
const (
	HealthOK       = "ok"
	HealthLowSpace = "low_space" // free space on the volume is below the reserve
	HealthGone     = "gone"      // the data directory was removed or replaced
	HealthReadOnly = "read_only" // the data directory can no longer take new files
)

// HealthReporter is implemented by stores that watch their disk, such as the one
// [OpenBadger] returns.
type HealthReporter interface {
	Health() Health
}

// Start-up failures of [OpenBadger], for errors.Is. Each comes wrapped with the directory
// and the detail.
var (
	ErrNoSpace    = errors.New("no space left on its volume")
	ErrReadOnly   = errors.New("read-only")
	ErrLocked     = errors.New("locked by another process")
	ErrNotDataDir = errors.New("not a svrpd data directory")
	// ErrNotClosed is returned by Close when the store was left open because closing it
	// could not succeed: the directory is gone or read-only, or the volume lacks the room to
	// write out what Badger holds in memory.
	ErrNotClosed = errors.New("store not closed")
)

// Disk bounds, with their reasons.
const (
	// DefaultReserveBytes and DefaultReservePercent make the default reserve: the larger of
	// the two. The reserve must hold what Badger writes on its own after the last accepted
	// write: a memtable flushed to a table and the compaction that follows it.
	DefaultReserveBytes   = 256 << 20
	DefaultReservePercent = 5.0
	// openRoom is the free space Badger needs to open a directory beyond replaying its
	// write-ahead logs: a new log, the manifest, the discard file's first pages.
	openRoom = 8 << 20
	// diskCheckEvery is how often the directory is watched when nothing writes: a fault
	// is noticed within this long even on an idle registry. Every write group checks too.
	diskCheckEvery = time.Second
	// touchCheckAge is how old a check a heartbeat may rely on: heartbeats write to
	// memory, so they do not each need a fresh look at the disk.
	touchCheckAge = 100 * time.Millisecond
)

// DiskReserve is the free space a store keeps on its volume. Bytes wins over Percent; the
// zero value is the default, the larger of DefaultReserveBytes and DefaultReservePercent of
// the volume.
type DiskReserve struct {
	Bytes   uint64
	Percent float64
}

func (r DiskReserve) resolve(total uint64) uint64 {
	switch {
	case r.Bytes > 0:
		return r.Bytes
	case r.Percent > 0:
		return uint64(float64(total) * r.Percent / 100)
	}
	return max(DefaultReserveBytes, uint64(float64(total)*DefaultReservePercent/100))
}

// reserveKey marks an Update that may use the reserve: it makes durable what was already
// acknowledged (heartbeat times), so refusing it would lose an acknowledgement.
type reserveKey struct{}

func withReserve(ctx context.Context) context.Context {
	return context.WithValue(ctx, reserveKey{}, true)
}

func mayUseReserve(ctx context.Context) bool {
	v, _ := ctx.Value(reserveKey{}).(bool)
	return v
}

// writeChecker is implemented by stores that may refuse writes; the node cache asks it
// before a heartbeat, which writes to memory only.
type writeChecker interface {
	checkWrite() error
}

// dirID identifies a directory: a directory removed and created again under the same name
// is another one.
type dirID struct{ dev, ino uint64 }

// diskStatus is one look at the disk.
type diskStatus struct {
	state  string
	detail string
	free   uint64
	at     time.Time
}

// diskGuard watches a store's directory: that it is still the one opened, that it still
// takes new files, and that its volume keeps the reserve free.
type diskGuard struct {
	dir     string
	id      dirID
	reserve uint64
	log     *slog.Logger
	// needed is the room Badger needs to flush and compact what it holds, refreshed by
	// the watch; writes stop when free space falls below it even if the reserve is smaller.
	needed atomic.Uint64

	mu  sync.Mutex // one look at a time, and one log line per change
	cur atomic.Pointer[diskStatus]
}

func newDiskGuard(dir string, id dirID, reserve uint64, log *slog.Logger) *diskGuard {
	g := &diskGuard{dir: dir, id: id, reserve: reserve, log: log}
	g.cur.Store(&diskStatus{state: HealthOK, at: time.Now()})
	return g
}

// limit is the free space below which writes stop: the reserve, or the room Badger needs,
// whichever is larger. Once stopped, writes resume only a sixteenth above it, so that free
// space hovering at the line does not turn writes on and off.
func (g *diskGuard) limit(stopped bool) uint64 {
	l := max(g.reserve, g.needed.Load())
	if stopped {
		l += l / 16
	}
	return l
}

func (g *diskGuard) look(prev *diskStatus) diskStatus {
	now := time.Now()
	id, err := statDir(g.dir)
	if err != nil || id != g.id {
		return diskStatus{state: HealthGone, detail: "the data directory was removed or replaced", at: now}
	}
	if err := dirWritable(g.dir); err != nil {
		return diskStatus{state: HealthReadOnly, detail: "the data directory no longer takes new files (" + errText(err) + ")", at: now}
	}
	free, _, err := freeSpace(g.dir)
	if err != nil {
		return diskStatus{state: HealthGone, detail: "the data directory's volume cannot be read (" + errText(err) + ")", at: now}
	}
	if l := g.limit(prev.state == HealthLowSpace); free < l {
		return diskStatus{state: HealthLowSpace, free: free, at: now,
			detail: fmt.Sprintf("%s free on the volume, below the %s kept in reserve", mib(free), mib(l))}
	}
	return diskStatus{state: HealthOK, free: free, at: now}
}

// refresh looks at the disk now, unless another caller did within maxAge, and logs a
// change of state once.
func (g *diskGuard) refresh(maxAge time.Duration) diskStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.cur.Load()
	if maxAge > 0 && time.Since(prev.at) < maxAge {
		return *prev
	}
	s := g.look(prev)
	g.cur.Store(&s)
	if s.state != prev.state && g.log != nil {
		if s.state == HealthOK {
			g.log.Info("store takes writes again", "free", mib(s.free))
		} else {
			g.log.Error("store refuses writes", "state", s.state, "reason", s.detail)
		}
	}
	return s
}

// allow says whether a write may go ahead in state s. A write that may use the reserve
// goes ahead on a low volume as long as what Badger needs is still free.
func (g *diskGuard) allow(s diskStatus, reserve bool) error {
	switch {
	case s.state == HealthOK:
		return nil
	case s.state == HealthLowSpace && reserve && s.free >= max(g.needed.Load(), g.reserve/2):
		return nil
	}
	return ErrUnavailable
}

func (g *diskGuard) health() Health {
	s := g.cur.Load()
	return Health{State: s.state, Detail: s.detail}
}

// sameDir reports whether the directory is still the one opened; it is checked after a
// commit, so that a write that went into a directory removed meanwhile is not acknowledged.
func (g *diskGuard) sameDir() bool {
	id, err := statDir(g.dir)
	return err == nil && id == g.id
}

func mib(n uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// memFileSuffix ends the names of Badger's write-ahead logs, one per memtable.
const memFileSuffix = ".mem"

// memFilesAllocated returns the disk space the write-ahead logs in dir actually occupy
// (they are sparse files): what a flush of the memtables will write out, at most.
func memFilesAllocated(dir string) uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n uint64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), memFileSuffix) {
			n += allocated(filepath.Join(dir, e.Name()))
		}
	}
	return n
}

// preflight checks dir before Badger opens it, so that a bad directory fails with one
// clear error instead of inside Badger: it creates a missing directory, then refuses one
// that holds other files than Badger's, that cannot take new files, that another process
// holds, or whose volume cannot hold Badger's replay. It returns the directory's identity
// and its volume's size.
func preflight(dir string) (dirID, uint64, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err != nil {
			return dirID{}, 0, startErr(dir, err, "cannot create it")
		}
		fi, err = os.Stat(dir)
	}
	if err != nil {
		return dirID{}, 0, startErr(dir, err, "cannot read it")
	}
	if !fi.IsDir() {
		return dirID{}, 0, fmt.Errorf("%s: %w: it is not a directory", dir, ErrNotDataDir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dirID{}, 0, startErr(dir, err, "cannot list it")
	}
	manifest, foreign := false, ""
	for _, e := range entries {
		switch e.Name() {
		case "MANIFEST":
			manifest = true
		case "lost+found":
		default:
			if foreign == "" {
				foreign = e.Name()
			}
		}
	}
	if !manifest && foreign != "" {
		return dirID{}, 0, fmt.Errorf("%s: %w: it holds %q but no Badger MANIFEST", dir, ErrNotDataDir, foreign)
	}
	if err := dirWritable(dir); err != nil {
		return dirID{}, 0, fmt.Errorf("%s: %w: it cannot take new files (%s)", dir, ErrReadOnly, errText(err))
	}
	if err := dirLocked(dir); err != nil {
		return dirID{}, 0, fmt.Errorf("%s: %w (%s)", dir, ErrLocked, errText(err))
	}
	id, err := statDir(dir)
	if err != nil {
		return dirID{}, 0, startErr(dir, err, "cannot read it")
	}
	free, total, err := freeSpace(dir)
	if err != nil {
		return dirID{}, 0, startErr(dir, err, "cannot read its volume")
	}
	if need := 2*memFilesAllocated(dir) + openRoom; free < need {
		return dirID{}, 0, fmt.Errorf("%s: %w: %s free, %s needed to open the store", dir, ErrNoSpace, mib(free), mib(need))
	}
	return id, total, nil
}

// startErr names the start-up failure that err is, when it is one of the clear ones.
func startErr(dir string, err error, what string) error {
	switch {
	case isNoSpace(err):
		return fmt.Errorf("%s: %w: %s", dir, ErrNoSpace, what)
	case isReadOnly(err):
		return fmt.Errorf("%s: %w: %s (%s)", dir, ErrReadOnly, what, errText(err))
	}
	return fmt.Errorf("%s: %s: %w", dir, what, err)
}
