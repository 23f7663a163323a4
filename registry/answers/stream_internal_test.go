package answers

// Tests of the listings as they are streamed: each answer, whole or cut by a filter or a
// page, plain or gzip, holds exactly the bytes encoding/json makes of the records (the bytes
// the registry has always answered), its length is known before it is written, and its tag
// changes with its snapshot and query only.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// table is a node table for the tests: its records, scanned in the order given.
type table []*store.Node

func (t table) ScanNodes(_ context.Context, fn func(*store.Node) error) error {
	for _, n := range t {
		if err := fn(n); err != nil {
			return err
		}
	}
	return nil
}

// oddText draws the strings a registration may carry, the awkward ones often.
var oddText = rapid.OneOf(
	rapid.SampledFrom([]string{"", "eu-west", "us-east-1", "ap\u2028south", "<&>", `"quoted"`, "tab\there", "é😀", "\xff\xfe"}),
	rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '<', '&', '\n', 0, 0x1f, '\u2029', 'é', 'a', '-'})),
)

// endpoints draws endpoints of every reachability: public and private IPv4 and IPv6,
// names, empty and malformed.
var endpoints = rapid.OneOf(
	rapid.SampledFrom([]string{"", "203.0.113.7:7000", "10.0.0.1:80", "[2001:db8::1]:7000", "[fe80::1%eth0]:1",
		"[::1]:9", "node.example:443", "127.0.0.1:1", "[2a00:1450:4001:82b::200e]:65535", "not an endpoint"}),
	oddText,
)

// drawNode draws one record; keys start with zero bytes often, which shortens their base58.
func drawNode(t *rapid.T, i int) *store.Node {
	var k didkey.PublicKey
	copy(k[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
	for z := range rapid.IntRange(0, 33).Draw(t, "zeros") % 34 {
		if z < len(k) && z < 3 {
			k[z] = 0
		}
	}
	k[31] = byte(i) // distinct keys
	k[30] = byte(i >> 8)
	n := &store.Node{
		Key:               k,
		DID:               rapid.OneOf(rapid.Just("did:key:z6Mk"+k.Base58()), oddText).Draw(t, "did"),
		Endpoint:          endpoints.Draw(t, "endpoint"),
		Capabilities:      rapid.OneOf(rapid.Just([]string(nil)), rapid.SliceOfN(rapid.SampledFrom([]string{"inference", "storage", "relay", "", "<x>"}), 0, 4)).Draw(t, "capabilities"),
		Region:            rapid.SampledFrom([]string{"", "eu-west", "us-east", "ap\u2028south", `r"\`}).Draw(t, "region"),
		SignatureVerified: rapid.Bool().Draw(t, "verified"),
		FirstSeen:         time.Unix(rapid.Int64Range(1_700_000_000, 1_700_000_050).Draw(t, "first"), rapid.SampledFrom([]int64{0, 0, 1, 999_999_999}).Draw(t, "first ns")),
		LastSeen:          time.Unix(rapid.Int64Range(1_700_000_000, 1_700_000_100).Draw(t, "last"), 0),
	}
	if rapid.Bool().Draw(t, "signed") {
		sig := rapid.OneOf(rapid.Just(""), oddText, rapid.Just(strings.Repeat("5nG1o7rf", 11))).Draw(t, "signature")
		n.Signature = &sig
	}
	if rapid.Bool().Draw(t, "v2") {
		ts := rapid.Int64().Draw(t, "registration_ts")
		n.RegistrationTS = &ts
	}
	return n
}

// want is the answer of kind k holding recs, as encoding/json writes it; next is the
// cursor of the page after, "" for none.
func want(k Kind, recs []*store.Node, next string) []byte {
	views := []api.NodeView{}
	var peers bytes.Buffer
	for _, n := range recs {
		views = append(views, NodeView(*n))
		fmt.Fprintf(&peers, "%s %s %s\n", n.DID, n.Key.Base58(), n.Endpoint)
	}
	var v any
	switch k.head {
	case NodesListing.head:
		v = struct {
			Count int            `json:"count"`
			Nodes []api.NodeView `json:"nodes"`
			Next  string         `json:"next,omitempty"`
		}{len(views), views, next}
	case APIPeersListing.head:
		v = struct {
			OK    bool           `json:"ok"`
			Data  []api.NodeView `json:"data"`
			Next  string         `json:"next,omitempty"`
			Error any            `json:"error"`
		}{true, views, next, nil}
	default:
		return peers.Bytes()
	}
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

func gunzip(t *rapid.T, b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip form: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip form: %v", err)
	}
	return out
}

// TestStreamedListingsMatchEncodingJSON: for tables of varied records and a page bound
// small enough that some answers are held and some streamed, every answer — each kind, whole
// or filtered, paged or not — is byte for byte what encoding/json makes of the records the
// filter keeps, in listing order, whether encoded as it is written or kept encoded; Size is
// its length; its gzip form, held or streamed, decodes to it.
func TestStreamedListingsMatchEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var tab table
		for i := range rapid.IntRange(0, 40).Draw(t, "nodes") {
			tab = append(tab, drawNode(t, i))
		}
		bounds := testBounds
		bounds.MaxPage = rapid.IntRange(1, 12).Draw(t, "max page")
		bounds.MaxHeldBytes = rapid.SampledFrom([]int{0, 2000, 1 << 20}).Draw(t, "max held")
		now := time.Unix(1_700_000_100, 0).UTC()
		c := NewListings(bounds, func() time.Time { return now })
		snap, done, err := c.Get(Version{Second: now.Unix()}, func(s *Snapshot) error { return s.Build(context.Background(), tab) })
		if err != nil {
			t.Fatal(err)
		}
		defer done()

		sorted := slices.Clone(tab)
		slices.SortFunc(sorted, func(a, b *store.Node) int {
			if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
				return c
			}
			return bytes.Compare(a.Key[:], b.Key[:])
		})
		f := api.NodeFilter{
			Region:       rapid.SampledFrom([]string{"", "eu-west", `r"\`}).Draw(t, "region filter"),
			Capabilities: rapid.SliceOfN(rapid.SampledFrom([]string{"inference", "relay"}), 0, 1).Draw(t, "capability filter"),
			Callable:     rapid.Bool().Draw(t, "callable"),
		}
		if rapid.Bool().Draw(t, "online") {
			f.OnlineWithin = time.Duration(rapid.IntRange(1, 100).Draw(t, "online within")) * time.Second
		}
		p := api.Page{Limit: rapid.IntRange(0, bounds.MaxPage).Draw(t, "limit")}
		if rapid.Bool().Draw(t, "changed since") {
			p.ChangedSince = time.Unix(rapid.Int64Range(1_700_000_000, 1_700_000_100).Draw(t, "since"), 0).UTC()
		}
		var kept []*store.Node
		for _, n := range sorted {
			if Keep(f, n, now) && (p.ChangedSince.IsZero() || !n.LastSeen.Before(p.ChangedSince)) {
				kept = append(kept, n)
			}
		}
		for _, k := range []Kind{NodesListing, APIPeersListing, PeersListing} {
			for _, q := range []struct {
				f api.NodeFilter
				p api.Page
			}{{api.NodeFilter{}, api.Page{}}, {f, p}} {
				sel := snap.Select(k, q.f, q.p, nil)
				recs, next := sorted, ""
				if q.p != p || q.f.Region != f.Region || !slices.Equal(q.f.Capabilities, f.Capabilities) || q.f.Callable != f.Callable || q.f.OnlineWithin != f.OnlineWithin {
					recs = sorted
				} else {
					recs = kept
					if p.Limit > 0 && len(kept) > p.Limit {
						recs, next = kept[:p.Limit], sel.Next()
						if next == "" {
							t.Fatalf("a page of %d of %d records names no next page", p.Limit, len(kept))
						}
					}
				}
				if !k.json {
					next = ""
				}
				w := want(k, recs, next)
				for range 2 { // encoded, then kept when it is held
					var got bytes.Buffer
					sel.Write(&got)
					if !bytes.Equal(got.Bytes(), w) {
						t.Fatalf("%s %+v %+v:\n got %s\nwant %s", k.head, q.f, q.p, got.Bytes(), w)
					}
				}
				if sel.Size() != len(w) {
					t.Fatalf("%s %+v %+v: Size %d, want %d", k.head, q.f, q.p, sel.Size(), len(w))
				}
				var streamed bytes.Buffer
				sel.WriteGzip(&streamed)
				if !bytes.Equal(gunzip(t, streamed.Bytes()), w) {
					t.Fatalf("%s %+v %+v: the streamed gzip form decodes to other bytes", k.head, q.f, q.p)
				}
				for range 2 { // kept from the second asking
					held := sel.Gzip()
					if want := sel.count <= bounds.MaxPage || len(w) <= bounds.MaxHeldBytes; (held != nil) != want {
						t.Fatalf("%s: %d records of %d bytes, page bound %d, held bound %d: gzip form given whole %v", k.head, sel.count, len(w), bounds.MaxPage, bounds.MaxHeldBytes, held != nil)
					}
					if held != nil && !bytes.Equal(gunzip(t, held), w) {
						t.Fatalf("%s %+v %+v: the held gzip form decodes to other bytes", k.head, q.f, q.p)
					}
				}
			}
		}
	})
}

// TestStreamedListingTags: the tag of an answer larger than a page names its snapshot and
// query: the same while the snapshot serves, another for another query or the next
// snapshot, and none shared with a registry started again; a small answer's tag is its
// bytes', the same across snapshots of the same records.
func TestStreamedListingTags(t *testing.T) {
	var tab table
	for i := range 30 {
		var k didkey.PublicKey
		k[0], k[1] = byte(i), 1
		tab = append(tab, &store.Node{Key: k, DID: fmt.Sprintf("did:n:%d", i), Endpoint: "[2001:db8::1]:7000",
			Region: []string{"eu-west", "us-east"}[i%2], FirstSeen: time.Unix(1_700_000_000, 0), LastSeen: time.Unix(1_700_000_000, 0)})
	}
	bounds := testBounds
	bounds.MaxPage = 20
	now := time.Unix(1_700_000_100, 0).UTC()
	clock := func() time.Time { return now }
	build := func(s *Snapshot) error { return s.Build(context.Background(), tab) }
	tags := func(c *Listings, v Version) (whole, region, wholeAgain string) {
		snap, done, err := c.Get(v, build)
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		all := snap.Select(NodesListing, api.NodeFilter{}, api.Page{}, nil)
		east := snap.Select(NodesListing, api.NodeFilter{Region: "us-east"}, api.Page{}, nil)
		again := snap.Select(NodesListing, api.NodeFilter{}, api.Page{}, nil)
		return all.Tag(), east.Tag(), again.Tag()
	}
	c := NewListings(bounds, clock)
	whole, east, again := tags(c, Version{Registrations: 1, Second: 1})
	if whole != again || whole == east || !strings.HasPrefix(whole, `"s`) {
		t.Fatalf("whole %s, again %s, us-east %s", whole, again, east)
	}
	if w2, _, _ := tags(c, Version{Registrations: 1, Second: 1}); w2 != whole {
		t.Fatalf("the same snapshot tagged %s, then %s", whole, w2)
	}
	w3, e3, _ := tags(c, Version{Registrations: 2, Second: 2})
	if w3 == whole {
		t.Fatalf("the next snapshot kept the tag %s", whole)
	}
	if e3 != east {
		t.Fatalf("a small answer of the same records: tag %s, then %s", east, e3)
	}
	if w4, _, _ := tags(NewListings(bounds, clock), Version{Registrations: 1, Second: 1}); w4 == whole {
		t.Fatalf("a registry started again gave its first snapshot's listing the tag %s of the one before", whole)
	}
}

// TestBase58Len: the length read from the powers of 58 is that of the encoding, for keys of
// every length of text, zero bytes in front included.
func TestBase58Len(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k didkey.PublicKey
		copy(k[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
		zeros := rapid.IntRange(0, 32).Draw(t, "zeros")
		for i := range zeros {
			k[i] = 0
		}
		if zeros < 32 && rapid.Bool().Draw(t, "small") {
			k[zeros] = byte(rapid.IntRange(1, 3).Draw(t, "lead"))
		}
		if got, want := base58Len(k[:]), len(k.Base58()); got != want {
			t.Fatalf("%x: base58Len %d, want %d", k, got, want)
		}
	})
}
