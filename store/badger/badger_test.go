package badger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	dgbadger "github.com/dgraph-io/badger/v4"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
)

func openBadger(t testing.TB, dir string, opts ...Option) store.Store {
	t.Helper()
	s, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBadger(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openBadger(t, t.TempDir()) })
}

// populate writes one of each record, with index entries, and returns a check that reads
// them all back through every lookup.
func populate(t *testing.T, s store.Store) func(*testing.T, store.Store) {
	k1, k2 := storetest.Key(1), storetest.Key(2)
	n1, n2 := storetest.Node(k1), storetest.Node(k2)
	n2.DID = storetest.FullDID(k2)
	s1, s2 := storetest.Session("s1", k1), storetest.Session("s2", k1)
	b := storetest.Binding(k1, "did:svrp:o:aaaaaaaa")
	bearer := storetest.BearerSession("did:svrp:o:aaaaaaaa")
	c := store.Counter{Count: 4, Start: storetest.Time(20)}
	storetest.Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutNode(n1), tx.PutNode(n2), tx.PutBindingSession(s1), tx.PutBindingSession(s2),
			tx.PutBinding(b), tx.PutBearerSession(storetest.Hash("tok"), bearer), tx.PutCounter("c", c))
	})
	return func(t *testing.T, s store.Store) {
		storetest.View(t, s, func(tx store.Tx) error {
			var nodes []store.Node
			err := tx.EachNode(func(n store.Node) error { nodes = append(nodes, n); return nil })
			want := []store.Node{n1, n2}
			if bytes.Compare(k2[:], k1[:]) < 0 {
				want = []store.Node{n2, n1}
			}
			storetest.Diff(t, "EachNode", want, nodes)
			k, err2 := tx.NodeKeyByDID(storetest.FullDID(k2))
			storetest.Diff(t, "NodeKeyByDID", k2, k)
			keys, err3 := tx.NodeKeysByShortBody(k1.ShortBody())
			storetest.Diff(t, "NodeKeysByShortBody", []didkey.PublicKey{k1}, keys)
			id, err4 := tx.BindingSessionIDBySecret(s2.TokenHash)
			storetest.Diff(t, "SessionIDBySecret", "s2", id)
			ss, err5 := tx.OpenBindingSessionsByNode(k1)
			storetest.Diff(t, "OpenSessionsByNode", []binding.BindingSession{s1, s2}, ss)
			bs, err6 := tx.BindingsByOperator("did:svrp:o:aaaaaaaa")
			storetest.Diff(t, "BindingsByOperator", []binding.Binding{b}, bs)
			gotBearer, err7 := tx.BearerSession(storetest.Hash("tok"))
			storetest.Diff(t, "OperatorSession", bearer, gotBearer)
			got, err8 := tx.Counter("c")
			storetest.Diff(t, "Counter", c, got)
			return errors.Join(err, err2, err3, err4, err5, err6, err7, err8)
		})
	}
}

func TestBadgerReopen(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	check := populate(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir)
	defer s.Close()
	check(t, s)
	// Reopening an existing database keeps accepting writes.
	storetest.Update(t, s, func(tx store.Tx) error { return tx.PutCounter("after", store.Counter{Count: 1}) })
}

func TestBadgerSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	s := openBadger(t, dir)
	defer s.Close()
	if s2, err := Open(dir); err == nil {
		s2.Close()
		t.Fatal("a second Open of an open directory succeeded")
	}
}

// A Badger store that is closed refuses with ErrUnavailable, so that a request a shutdown
// catches is told to come back.
func TestClosedIsUnavailable(t *testing.T) {
	s := openBadger(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"update": s.Update(ctx, func(store.Tx) error { return nil }),
		"view":   s.View(ctx, func(tx store.Tx) error { _, err := tx.NodeCount(); return err }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a closed store: %v, want ErrUnavailable", name, err)
		}
	}
}

func TestBadgerSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	openBadger(t, dir).Close()
	db, err := dgbadger.Open(dgbadger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *dgbadger.Txn) error { return txn.Set([]byte(pVersion), []byte("99")) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted an unknown schema version")
	}
	if !strings.Contains(err.Error(), "schema version") {
		t.Errorf("error %q does not name the schema version", err)
	}
}

func TestBadgerMaintain(t *testing.T) {
	s := openBadger(t, t.TempDir())
	m := s
	for i := range 200 {
		storetest.Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", store.Counter{Count: i}) })
	}
	if err := m.Maintain(context.Background()); err != nil {
		t.Errorf("Maintain: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Maintain(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Maintain with a cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Maintain(context.Background()); err == nil {
		t.Error("Maintain after Close succeeded")
	}
}

// recordingHandler keeps the level of every record it is given.
type recordingHandler struct {
	mu     sync.Mutex
	levels []slog.Level
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.levels = append(h.levels, r.Level)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func TestBadgerLogger(t *testing.T) {
	h := &recordingHandler{}
	dir := t.TempDir()
	for range 2 { // create, then reopen
		s := openBadger(t, dir, WithLogger(slog.New(h)))
		storetest.Update(t, s, func(tx store.Tx) error { return tx.PutCounter("c", store.Counter{Count: 1}) })
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.levels) == 0 {
		t.Fatal("Badger's messages did not reach the logger")
	}
	for _, l := range h.levels {
		if l > slog.LevelDebug {
			t.Errorf("a routine open and close logged at %v", l)
		}
	}
}

// crashDirEnv names the directory the helper process writes to; its presence is what makes
// TestBadgerCrashHelper act.
const crashDirEnv = "SVRP_STORE_CRASH_DIR"

// TestBadgerCrashHelper is not a test: TestBadgerCrash runs the test binary again with only
// this function and crashDirEnv set, and kills it while it writes.
func TestBadgerCrashHelper(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestBadgerCrash")
	}
	s, err := Open(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			return tx.PutCounter(strconv.Itoa(i), store.Counter{Count: i})
		})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		// Written straight to the pipe: os.Stdout is not buffered.
		fmt.Printf("ok %d\n", i)
	}
}

// TestBadgerCrash kills a writing process with SIGKILL and checks that every write it
// acknowledged is there after reopening. It covers a process crash; surviving a machine
// crash is what SyncWrites adds, which a test cannot simulate here.
func TestBadgerCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	const killAfter = 100
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadgerCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[int]bool{}
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "ok ")
		if !ok {
			t.Logf("helper: %s", line)
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil {
			t.Fatalf("helper printed %q", line)
		}
		acked[i] = true
		if len(acked) == killAfter && !killed {
			// Kill sends SIGKILL: no deferred function, no Close.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		// Lines already in the pipe were acknowledged before the kill and count too.
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("helper stopped after %d writes: %v", len(acked), err)
	}

	s := openBadger(t, dir)
	defer s.Close()
	storetest.View(t, s, func(tx store.Tx) error {
		for i := range acked {
			c, err := tx.Counter(strconv.Itoa(i))
			if err != nil {
				return err
			}
			if c.Count != i {
				t.Errorf("acknowledged write %d lost after SIGKILL (got %+v)", i, c)
			}
		}
		return nil
	})
	t.Logf("%d acknowledged writes survived", len(acked))
}

func BenchmarkBadgerPutNode(b *testing.B) { storetest.BenchPutNode(b, openBadger(b, b.TempDir())) }

func BenchmarkBadgerGetNode(b *testing.B) { storetest.BenchGetNode(b, openBadger(b, b.TempDir())) }

// BenchmarkBadgerPutNodeParallel measures concurrent heartbeats. Updates run one at a time
// and each syncs the log, so concurrency does not raise write throughput; it should not
// lower it either.
func BenchmarkBadgerPutNodeParallel(b *testing.B) {
	s := openBadger(b, b.TempDir())
	defer s.Close()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		n := storetest.Node(storetest.Key(0))
		for pb.Next() {
			i := int(next.Add(1))
			n.Key = storetest.BenchKeys[i%len(storetest.BenchKeys)]
			n.LastSeen = storetest.Time(i)
			if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutNode(n) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A database of an older build, with a key per bearer session under u/ and no v/ records,
// gets each operator's record at open, and the older keys are gone.
func TestBadgerListsOldSessions(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h1, h2, h3 := storetest.Hash("t1"), storetest.Hash("t2"), storetest.Hash("t3")
	op, other := "did:svrp:o:aaaaaaaa", "did:svrp:o:bbbbbbbb"
	storetest.Update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.PutBearerSession(h1, storetest.BearerSession(op)),
			tx.PutBearerSession(h2, storetest.BearerSession(other)), tx.PutBearerSession(h3, storetest.BearerSession(op)))
	})
	// Leave the database as the older build did: a u/ key per session, the older mark.
	db := s.(*badgerStore).db
	if err := db.Update(func(txn *dgbadger.Txn) error {
		for _, k := range [][]byte{key(pOpSessions, op), key(pOpSessions, other), []byte(kOpListed)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for _, e := range []struct {
			did string
			h   [32]byte
		}{{op, h1}, {other, h2}, {op, h3}} {
			if err := txn.Set(key("u/", e.did, hex.EncodeToString(e.h[:])), nil); err != nil {
				return err
			}
		}
		return txn.Set([]byte(kOpIndexed), []byte("1"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.View(t, s, func(tx store.Tx) error {
		got, err := tx.BearerSessionsOf(op)
		want := [][32]byte{h1, h3}
		slices.SortFunc(want, compareHash)
		storetest.Diff(t, "BearerSessionsOf after reopening", want, got)
		return err
	})
	if err := s.(*badgerStore).db.View(func(txn *dgbadger.Txn) error {
		it := txn.NewIterator(dgbadger.IteratorOptions{Prefix: []byte(pOldOpSessions)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			t.Errorf("the older build's key %q is still there", it.Item().Key())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// An operator that logs in and out many times keeps one record: its sessions are read with
// one Get, however many came and went before.
func TestBadgerOperatorSessionsOneRecord(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	op := "did:svrp:o:aaaaaaaa"
	for i := range 200 {
		h := storetest.Hash(fmt.Sprint("t", i))
		storetest.Update(t, s, func(tx store.Tx) error {
			if err := tx.PutBearerSession(h, storetest.BearerSession(op)); err != nil {
				return err
			}
			if i%2 == 1 {
				return tx.DeleteBearerSession(h)
			}
			return nil
		})
	}
	keys := 0
	if err := s.(*badgerStore).db.View(func(txn *dgbadger.Txn) error {
		it := txn.NewIterator(dgbadger.IteratorOptions{Prefix: []byte(pOpSessions)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	storetest.View(t, s, func(tx store.Tx) error {
		got, err := tx.BearerSessionsOf(op)
		if len(got) != 100 || keys != 1 {
			t.Errorf("%d sessions in %d keys; want 100 in 1", len(got), keys)
		}
		return err
	})
}
