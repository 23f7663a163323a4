package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/storekit"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/storetest"
	"github.com/svrp/svrp/translog"
)

// contents is every record of a store, kind by kind, as the copy sees them.
type contents struct {
	Nodes    []store.Node
	Sessions []binding.BindingSession
	Bindings []binding.Binding
	Revoked  []store.Revocation
	Bearer   map[[32]byte]authn.BearerSession
	Counters map[string]store.Counter
	Log      translog.Checkpoint
	LogSeed  [32]byte
}

func dump(t testing.TB, s store.Store) contents {
	t.Helper()
	c := contents{Bearer: map[[32]byte]authn.BearerSession{}, Counters: map[string]store.Counter{}}
	storetest.View(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.EachNode(func(n store.Node) error { c.Nodes = append(c.Nodes, n); return nil }),
			tx.EachBindingSession(func(x binding.BindingSession) error { c.Sessions = append(c.Sessions, x); return nil }),
			tx.EachBinding(func(b binding.Binding) error { c.Bindings = append(c.Bindings, b); return nil }),
			tx.EachRevocation(func(r store.Revocation) error { c.Revoked = append(c.Revoked, r); return nil }),
			tx.EachBearerSession(func(h [32]byte, x authn.BearerSession) error { c.Bearer[h] = x; return nil }),
			tx.EachCounter(func(k string, x store.Counter) error { c.Counters[k] = x; return nil }),
			func() (err error) { c.Log, err = translog.Head(tx, "copy"); return err }(),
			func() error {
				var err error
				if c.LogSeed, err = tx.LogSeed(); errors.Is(err, store.ErrNotFound) {
					return nil
				}
				return err
			}(),
		)
	})
	return c
}

// fill writes a registry's worth of every kind, nodes across several batches, and one
// operator session that has expired.
func fill(t testing.TB, s store.Store, nodes int) {
	t.Helper()
	for lo := 0; lo < nodes; lo += batchSize {
		storetest.Update(t, s, func(tx store.Tx) error {
			for i := lo; i < min(lo+batchSize, nodes); i++ {
				if err := tx.PutNode(storetest.Node(storetest.Key(i))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	live := storetest.BearerSession("did:svrp:o:op1")
	live.ExpiresAt = time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	storetest.Update(t, s, func(tx store.Tx) error {
		var errs []error
		for i := range 3 {
			k := storetest.Key(i)
			errs = append(errs,
				tx.PutBindingSession(storetest.Session(fmt.Sprint("sess-", i), k)),
				tx.PutBinding(storetest.Binding(k, "did:svrp:o:op1")),
				tx.PutRevocation(store.Revocation{OperatorDID: "did:svrp:o:op1", RevocationID: fmt.Sprint("rev/", i), RevokedAt: storetest.Time(i), RecordedAt: storetest.Time(i)}),
				tx.PutCounter(fmt.Sprint("resolve/", i), store.Counter{Count: i + 1, Start: storetest.Time(i)}),
			)
		}
		errs = append(errs,
			tx.PutOperatorPin(store.OperatorPin{Body: "cc2dfc37", RootKey: storetest.Key(9), PinnedAt: storetest.Time(1), LoggedInAt: storetest.Time(2)}),
			tx.PutBearerSession(storetest.Hash("live"), live),
			tx.PutBearerSession(storetest.Hash("expired"), storetest.BearerSession("did:svrp:o:op1")),
			tx.PutLogSeed([32]byte{1, 2, 3}))
		return errors.Join(errs...)
	})
	// Log entries across more than one batch, which must land in their order.
	for lo := 0; lo < batchSize+3; lo += batchSize {
		storetest.Update(t, s, func(tx store.Tx) error {
			for i := lo; i < min(lo+batchSize, batchSize+3); i++ {
				if _, err := translog.AppendBytes(tx, fmt.Appendf(nil, "entry %d\n", i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

func TestCopyCarriesEveryKind(t *testing.T) {
	for name, open := range storekit.All() {
		t.Run(name, func(t *testing.T) {
			src := store.NewMemory()
			fill(t, src, 2*batchSize+7)
			want := dump(t, src)
			delete(want.Bearer, storetest.Hash("expired"))

			mid := open(t)
			var progress strings.Builder
			counts, err := Copy(context.Background(), src, mid, &progress)
			if err != nil {
				t.Fatalf("Copy: %v\n%s", err, progress.String())
			}
			for _, c := range counts {
				if c.Source != c.Target {
					t.Errorf("%s: %d copied, %d in the target", c.Kind, c.Source, c.Target)
				}
			}
			if got := counts[0]; got.Kind != "nodes" || got.Source != 2*batchSize+7 {
				t.Errorf("nodes count = %+v, want %d", got, 2*batchSize+7)
			}
			storetest.Diff(t, "copied", want, dump(t, mid))

			// And back: a copy of the copy is the same registry.
			back := store.NewMemory()
			if _, err := Copy(context.Background(), mid, back, io.Discard); err != nil {
				t.Fatal(err)
			}
			storetest.Diff(t, "copied back", want, dump(t, back))
			var n int
			storetest.View(t, back, func(tx store.Tx) (err error) { n, err = tx.RevocationCount(); return err })
			if n != len(want.Revoked) {
				t.Errorf("RevocationCount after the copy = %d, want %d", n, len(want.Revoked))
			}
		})
	}
}

func TestCopyRefusesANonEmptyTarget(t *testing.T) {
	for name, open := range storekit.All() {
		t.Run(name, func(t *testing.T) {
			src := store.NewMemory()
			fill(t, src, 10)
			dst := open(t)
			// One record of the least likely kind is enough to refuse.
			storetest.Update(t, dst, func(tx store.Tx) error {
				return tx.PutCounter("x", store.Counter{Count: 1})
			})
			before := dump(t, dst)
			_, err := Copy(context.Background(), src, dst, io.Discard)
			if !errors.Is(err, ErrTargetNotEmpty) {
				t.Fatalf("Copy into a non-empty store: %v, want ErrTargetNotEmpty", err)
			}
			storetest.Diff(t, "target after a refused copy", before, dump(t, dst))
		})
	}
}
