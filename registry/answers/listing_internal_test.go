package answers

// Tests of listing.go and pages.go: the snapshot cache, the record JSON and the cursors.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
	"pgregory.net/rapid"
)

// fakeBuild returns a build function that makes a snapshot of size bytes and counts builds;
// release, when not nil, holds every build until it is closed.
func fakeBuild(builds *atomic.Int32, size int, release chan struct{}) func(*Snapshot) error {
	return func(s *Snapshot) error {
		builds.Add(1)
		if release != nil {
			<-release
		}
		s.size = size
		return nil
	}
}

// TestListCacheBuildsOnce: readers of one version share one build, even when they arrive
// while it is being built, whatever filter they will apply; a new version builds again; a
// failed build is not kept.
func TestListCacheBuildsOnce(t *testing.T) {
	c := NewListings(testBounds, nil)
	var builds atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, done, err := c.Get(Version{Registrations: 1, Second: 100}, fakeBuild(&builds, 10, release))
			defer done()
			if err != nil {
				t.Errorf("get: %v", err)
			}
		}()
	}
	close(release)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("16 concurrent readers built %d snapshots, want 1", n)
	}
	for _, v := range []Version{{Registrations: 1, Second: 101}, {Registrations: 1, Touches: 1, Second: 101}, {Registrations: 2, Touches: 1, Second: 101}} {
		_, done, _ := c.Get(v, fakeBuild(&builds, 10, nil))
		done()
	}
	if n := builds.Load(); n != 3 {
		t.Fatalf("after a quiet second, a heartbeat and a registration: %d builds, want 3", n)
	}
	if c.held != 10 {
		t.Fatalf("%d bytes held after every reader left, want only the current snapshot's 10", c.held)
	}

	boom := errors.New("boom")
	v := Version{Registrations: 3}
	if _, done, err := c.Get(v, func(*Snapshot) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed build: %v", err)
	} else {
		done()
	}
	if _, done, err := c.Get(v, fakeBuild(&builds, 10, nil)); err != nil {
		t.Fatalf("after a failed build the next reader should build again: %v", err)
	} else {
		done()
	}
	if c.held != 10 {
		t.Fatalf("%d bytes held, want 10", c.held)
	}
}

// TestListCacheBound: while slow readers hold old snapshots, a new one is built only if the
// bound leaves room; otherwise readers get the newest one built, stale, and the memory held
// never passes the bound. One snapshot alone may be as large as it is.
func TestListCacheBound(t *testing.T) {
	c := NewListings(testBounds, nil)
	var builds atomic.Int32
	size := testBounds.MaxBytes / 3
	var held []func()
	for tick := range int64(10) {
		s, done, err := c.Get(Version{Registrations: 1, Touches: uint64(tick), Second: tick}, fakeBuild(&builds, size, nil))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, done) // a slow reader keeps every snapshot it got
		if c.held > testBounds.MaxBytes {
			t.Fatalf("tick %d: %d bytes held, bound %d", tick, c.held, testBounds.MaxBytes)
		}
		if s.v.Second != tick && builds.Load() < 3 {
			t.Fatalf("tick %d: served a stale snapshot with room to spare", tick)
		}
	}
	if n := builds.Load(); n != 3 {
		t.Fatalf("%d snapshots built while readers held them, want the 3 the bound holds", n)
	}
	for _, done := range held {
		done()
	}
	if c.held != size {
		t.Fatalf("after the readers left %d bytes are held, want the current snapshot's %d", c.held, size)
	}
	// With the old ones gone there is room again.
	_, done, _ := c.Get(Version{Registrations: 1, Touches: 99, Second: 99}, fakeBuild(&builds, size, nil))
	done()
	if n := builds.Load(); n != 4 {
		t.Fatalf("%d builds, want 4", n)
	}

	one := NewListings(testBounds, nil)
	for tick := range int64(3) {
		_, done, _ := one.Get(Version{Touches: uint64(tick), Second: tick}, fakeBuild(&builds, testBounds.MaxBytes+1, nil))
		done()
	}
	if n := builds.Load(); n != 7 {
		t.Fatalf("an oversized only snapshot was not rebuilt as the table changed: %d builds, want 7", n)
	}
}

// The hand-written encoder must produce exactly the bytes encoding/json produces for the same
// record, whatever the strings hold: quotes, backslashes, control characters, HTML
// characters, line separators, other non-ASCII and invalid UTF-8; for the record as given and
// as the store's lean table holds it (a DID derived from the key, text marked plain, times
// beyond Unix nanoseconds).
func TestAppendNodeJSONMatchesEncodingJSON(t *testing.T) {
	text := rapid.OneOf(
		rapid.String(),
		rapid.StringMatching(`[a-z0-9.:\-]{0,24}`),
		rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '<', '>', '&', '\n', '\r', '\t', 0, 0x1f, 0x7f, '\u2028', '\u2029', 'é', '😀', 'a', ' '})),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }),
	)
	rapid.Check(t, func(t *rapid.T) {
		var k didkey.PublicKey
		copy(k[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
		n := store.Node{
			Key:               k,
			DID:               text.Draw(t, "did"),
			Endpoint:          text.Draw(t, "endpoint"),
			Capabilities:      rapid.SliceOfN(text, 0, 4).Draw(t, "capabilities"),
			Region:            text.Draw(t, "region"),
			SignatureVerified: rapid.Bool().Draw(t, "verified"),
			FirstSeen:         time.Unix(rapid.Int64Range(-1e11, 1e12).Draw(t, "first"), 0),
			LastSeen:          time.Unix(rapid.Int64Range(-1e11, 1e12).Draw(t, "last"), 0),
		}
		if rapid.Bool().Draw(t, "signed") {
			sig := text.Draw(t, "signature")
			n.Signature = &sig
		}
		if rapid.Bool().Draw(t, "v2") {
			ts := rapid.Int64().Draw(t, "registration_ts")
			n.RegistrationTS = &ts
		}
		switch rapid.IntRange(0, 2).Draw(t, "did_form") {
		case 1:
			n.DID = "did:svrp:n:" + k.ShortBody()
		case 2:
			n.DID = "did:svrp:" + k.Hex()
		}
		want, err := json.Marshal(NodeView(n))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendNodeJSON(nil, n); !bytes.Equal(got, want) {
			t.Fatalf("appendNodeJSON:\n got %s\nwant %s", got, want)
		}
		list, err := store.ListNodes(context.Background(), table{&n})
		if err != nil {
			t.Fatal(err)
		}
		given, lean := store.RowOf(&n), store.NodeRow{}
		list.Row(0, &lean)
		reach := api.Reachability(n.Endpoint)
		for _, row := range []*store.NodeRow{&given, &lean} {
			if got := appendRecordJSON(nil, row, reach, nil); !bytes.Equal(got, want) {
				t.Fatalf("appendRecordJSON (plain %v, derived DID %v):\n got %s\nwant %s", row.Plain, row.DIDDerived(), got, want)
			}
			if size := nodeJSONLen(row, reach); size != len(want) {
				t.Fatalf("nodeJSONLen %d, want %d", size, len(want))
			}
			line := appendPeerLine(nil, row)
			if size := peerLineLen(row); size != len(line) {
				t.Fatalf("peerLineLen %d, want %d (%q)", size, len(line), line)
			}
			if want := n.DID + " " + n.Key.Base58() + " " + n.Endpoint + "\n"; string(line) != want {
				t.Fatalf("peer line %q, want %q", line, want)
			}
		}
		if got := list.Node(0); !reflect.DeepEqual(got.Capabilities, n.Capabilities) || got.DID != n.DID ||
			!got.FirstSeen.Equal(n.FirstSeen) || !got.LastSeen.Equal(n.LastSeen) || got.Endpoint != n.Endpoint {
			t.Fatalf("the lean table gives back %+v, not %+v", got, n)
		}
	})
}

// FuzzParseCursor: a cursor that parses renders to one that parses to the same place, and
// none panics.
func FuzzParseCursor(f *testing.F) {
	var key didkey.PublicKey
	key[0] = 7
	for _, s := range []string{"", "!", "AAAA", Cursor{at: time.Unix(1736937000, 0).UTC(), key: key[:]}.String(),
		Cursor{at: time.Unix(-1, 0).UTC(), key: []byte("did:svrp:n:34910d78")}.String()} {
		f.Add(s, 32)
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, s string, keyLen int) {
		if keyLen < 0 || keyLen > testBounds.MaxCursorKey {
			return
		}
		c, err := parseCursor(s, keyLen, testBounds.MaxCursorKey)
		if err != nil {
			return
		}
		again, err := parseCursor(c.String(), keyLen, testBounds.MaxCursorKey)
		if err != nil || !again.at.Equal(c.at) || !bytes.Equal(again.key, c.key) {
			t.Fatalf("%q: %+v renders to %q, which parses to %+v (%v)", s, c, c.String(), again, err)
		}
	})
}

// testBounds are bounds in the proportions of the registry's; the tests need the
// proportions, not the values.
var testBounds = Bounds{MaxBytes: 512 << 20, MaxGzipBytes: 32 << 20, MaxVariants: 256, MaxPage: 10_000, MaxCursorKey: 512}
