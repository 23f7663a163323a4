package badger

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

func putNode(s store.Store, i int) error {
	return s.Update(context.Background(), func(tx store.Tx) error { return tx.PutNode(storetest.Node(storetest.Key(i))) })
}

// TestBadgerBelowReserve opens a store whose reserve is larger than any volume: every write
// is refused with ErrUnavailable and changes nothing, reads still work, heartbeat flushes
// of acknowledged touches may still use the reserve down to what Badger needs, and the
// refusal is logged once.
func TestBadgerBelowReserve(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the disk is watched on Linux only")
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s := openBadger(t, t.TempDir(), WithLogger(log), WithDiskReserve(DiskReserve{Bytes: 1 << 62}))
	defer s.Close()
	for range 3 {
		if err := putNode(s, 1); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("write below the reserve: %v, want store.ErrUnavailable", err)
		}
	}
	err := s.View(context.Background(), func(tx store.Tx) error {
		n, err := tx.NodeCount()
		if err == nil && n != 0 {
			t.Errorf("a refused write left %d nodes", n)
		}
		return err
	})
	if err != nil {
		t.Fatalf("read below the reserve: %v", err)
	}
	if h := s.Health(); h.State != store.HealthLowSpace || !strings.Contains(h.Detail, "reserve") {
		t.Errorf("health %+v", h)
	}
	// The reserve is larger than the volume, so even a flush finds too little room.
	if err := s.Update(store.ForTouches(context.Background()), func(store.Tx) error { return nil }); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a reserve write with less free than the reserve's half: %v", err)
	}
	if n := strings.Count(logs.String(), "store refuses writes"); n != 1 {
		t.Errorf("the refusal was logged %d times:\n%s", n, logs.String())
	}
}

// TestBadgerReserveWrite checks that a write marked as making acknowledged state durable
// goes ahead below the reserve while Badger's own room is free, and that a plain one does
// not.
func TestBadgerReserveWrite(t *testing.T) {
	g := &diskGuard{reserve: 100 << 20}
	g.needed.Store(10 << 20)
	low := diskStatus{state: store.HealthLowSpace, free: 60 << 20}
	if err := g.allow(low, false); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("plain write below the reserve: %v", err)
	}
	if err := g.allow(low, true); err != nil {
		t.Errorf("reserve write with room: %v", err)
	}
	if err := g.allow(diskStatus{state: store.HealthLowSpace, free: 40 << 20}, true); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("reserve write below half the reserve: %v", err)
	}
	for _, st := range []string{store.HealthGone, store.HealthReadOnly} {
		if err := g.allow(diskStatus{state: st, free: 1 << 40}, true); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("reserve write with the directory %s: %v", st, err)
		}
	}
	if g.limit(true) <= g.limit(false) {
		t.Errorf("no hysteresis: resume at %d, stop at %d", g.limit(true), g.limit(false))
	}
}

// TestBadgerDirectoryRemoved removes a store's directory under it: the next write is
// refused, health says gone, the node cache refuses heartbeats, and Close leaves Badger
// open and says so instead of retrying on a directory that is not there.
func TestBadgerDirectoryRemoved(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the disk is watched on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "data")
	inner := openBadger(t, dir)
	s, err := store.WithNodeCache(context.Background(), inner)
	if err != nil {
		t.Fatal(err)
	}
	if err := putNode(s, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := putNode(s, 2); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("write after the directory was removed: %v", err)
	}
	if h := s.Health(); h.State != store.HealthGone {
		t.Errorf("health %+v", h)
	}
	time.Sleep(touchCheckAge)
	if err := s.TouchNode(context.Background(), storetest.Key(1), time.Now().Add(time.Hour)); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("touch after the directory was removed: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrNotClosed) {
		t.Errorf("Close: %v, want ErrNotClosed", err)
	}
}

// TestBadgerStartRefusals opens directories a store must refuse, each with its error.
func TestBadgerStartRefusals(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the disk is watched on Linux only")
	}
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := t.TempDir()
	s := openBadger(t, held)
	defer s.Close()
	for _, tc := range []struct {
		dir  string
		want error
	}{{foreign, ErrNotDataDir}, {file, ErrNotDataDir}, {held, ErrLocked}} {
		if _, err := Open(tc.dir); !errors.Is(err, tc.want) {
			t.Errorf("Open(%s): %v, want %v", tc.dir, err, tc.want)
		}
	}
	// An empty directory, and one holding only lost+found, are fresh stores.
	fresh := t.TempDir()
	if err := os.Mkdir(filepath.Join(fresh, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(fresh)
	if err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	s2.Close()
}

// TestSlogBadgerLimit drives the limiter of Badger's log lines as a retry loop would, one
// error a second for ten minutes: at most the burst and then one line per badgerEvery pass,
// and each line after a gap says how many were suppressed.
func TestSlogBadgerLimit(t *testing.T) {
	s := newSlogBadger(slog.New(slog.DiscardHandler))
	start := s.last
	passed, suppressed := 0, 0
	for i := range 600 {
		ok, n := s.admit(start.Add(time.Duration(i) * time.Second))
		if ok {
			passed++
			suppressed += n
		}
	}
	if want := badgerBurst + int(10*time.Minute/badgerEvery); passed > want+1 {
		t.Errorf("%d lines in ten minutes, want at most %d", passed, want)
	}
	if passed+suppressed+s.suppressed != 600 {
		t.Errorf("%d passed + %d counted as suppressed + %d pending != 600", passed, suppressed, s.suppressed)
	}
}

func TestDiskReserveResolve(t *testing.T) {
	for _, tc := range []struct {
		r     DiskReserve
		total uint64
		want  uint64
	}{
		{DiskReserve{}, 1 << 30, DefaultReserveBytes},     // 5 % of 1 GiB is less than 256 MiB
		{DiskReserve{}, 100 << 30, 5 << 30},               // 5 % of 100 GiB
		{DiskReserve{Bytes: 1 << 20}, 100 << 30, 1 << 20}, // bytes as given
		{DiskReserve{Percent: 10}, 10 << 30, 1 << 30},
		{DiskReserve{Bytes: 7, Percent: 10}, 10 << 30, 7},
	} {
		if got := tc.r.resolve(tc.total); got != tc.want {
			t.Errorf("%+v of %d: %d, want %d", tc.r, tc.total, got, tc.want)
		}
	}
}
