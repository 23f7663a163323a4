package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
)

// TestNodeTableAgainstAMap writes a table of a few blocks as the registry does —
// registrations mostly in time order, some within the same second, some older; re-
// registrations; deletions; touches — and checks after each round that every record is
// found by its key and short body as written, and that a list holds the records in listing
// order and does not change when the table changes after it.
func TestNodeTableAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newNodeTable(0)
	want := map[didkey.PublicKey]Node{}
	base := time.Unix(1_767_225_600, 0).UTC()
	key := func(i int) didkey.PublicKey {
		var seed [8]byte
		binary.BigEndian.PutUint64(seed[:], uint64(i))
		return sha256.Sum256(seed[:])
	}
	node := func(i int, at time.Time) Node {
		k := key(i)
		sig := fmt.Sprintf("sig-%d", i)
		n := Node{Key: k, DID: "did:svrp:n:" + k.ShortBody(), Endpoint: fmt.Sprintf("203.0.113.%d:%d", i%250, 7000+i),
			Capabilities: [][]string{nil, {}, {"gpu"}}[i%3], Region: []string{"", "eu-west"}[i%2],
			Signature: &sig, SignatureVerified: i%2 == 0, FirstSeen: at, LastSeen: at, Origin: "198.51.100.0/24"}
		switch i % 7 {
		case 1:
			n.DID = "did:svrp:" + k.Hex()
		case 2:
			n.DID = fmt.Sprintf("odd \"did\" %d", i)
		case 3:
			n.Signature = nil
		case 4:
			n.FirstSeen = n.FirstSeen.Add(time.Duration(i) * time.Nanosecond)
			n.LastSeen = time.Time{}
		}
		return n
	}
	var lists []*NodeList
	var held [][]Node
	next := 0
	for round := range 12 {
		for range 1500 {
			switch op := rng.IntN(10); {
			case op < 6 || len(want) == 0:
				// A new registration, now or a little before.
				at := base.Add(time.Duration(round*100+rng.IntN(3)) * time.Second)
				if rng.IntN(50) == 0 {
					at = base.Add(-time.Hour)
				}
				n := node(next, at)
				next++
				tab.put(&n, uint64(next))
				want[n.Key] = n
			case op < 8:
				k := key(rng.IntN(next))
				if n, ok := want[k]; ok {
					n.LastSeen = n.LastSeen.Add(time.Minute)
					s, _ := tab.find(k)
					tab.touch(s, n.LastSeen)
					want[k] = n
				}
			case op < 9:
				k := key(rng.IntN(next))
				if n, ok := want[k]; ok {
					n.Endpoint = "[2001:db8::1]:9000"
					tab.put(&n, uint64(next))
					want[k] = n
				}
			default:
				k := key(rng.IntN(next))
				tab.remove(k)
				delete(want, k)
			}
		}
		checkTable(t, tab, want)
		l := tab.list()
		lists = append(lists, l)
		held = append(held, listNodes(l))
		checkList(t, l, want)
	}
	// Records older than any other fill the first block past its bound: the table is sorted
	// again.
	for range maxBlockLen {
		n := node(next, base.Add(-2*time.Hour+time.Duration(rng.IntN(1000))*time.Second))
		next++
		tab.put(&n, uint64(next))
		want[n.Key] = n
	}
	checkTable(t, tab, want)
	checkList(t, tab.list(), want)

	// Deleting most records leaves so many dead that the table is rebuilt.
	removed := tab.dead
	for k := range want {
		if rng.IntN(10) > 0 {
			tab.remove(k)
			delete(want, k)
			removed++
		}
	}
	if removed <= blockLen || tab.dead >= removed {
		t.Errorf("%d records removed, %d dead ones still held", removed, tab.dead)
	}
	checkTable(t, tab, want)
	checkList(t, tab.list(), want)
	for i, l := range lists {
		if got := listNodes(l); !reflect.DeepEqual(got, held[i]) {
			t.Fatalf("list %d changed after it was taken", i)
		}
	}
}

func listNodes(l *NodeList) []Node {
	out := make([]Node, l.Len())
	for i := range out {
		out[i] = cloneNode(l.Node(i))
	}
	return out
}

func checkTable(t *testing.T, tab *nodeTable, want map[didkey.PublicKey]Node) {
	t.Helper()
	if tab.live != len(want) {
		t.Fatalf("the table holds %d records, want %d", tab.live, len(want))
	}
	for k, n := range want {
		s, ok := tab.find(k)
		if !ok {
			t.Fatalf("%x not found", k[:4])
		}
		if got := tab.node(s); !sameNode(got, n) {
			t.Fatalf("%x: got %+v, want %+v", k[:4], got, n)
		}
		if !slices.Contains(tab.keysByShort(shortBodyOf(k)), k) {
			t.Fatalf("%x not found by its short body", k[:4])
		}
		if !tab.didIs(s, n.DID) {
			t.Fatalf("%x: its DID %q is not recognised", k[:4], n.DID)
		}
	}
}

func checkList(t *testing.T, l *NodeList, want map[didkey.PublicKey]Node) {
	t.Helper()
	if l.Len() != len(want) {
		t.Fatalf("the list holds %d records, want %d", l.Len(), len(want))
	}
	for i := range l.Len() {
		n := l.Node(i)
		if !sameNode(n, want[n.Key]) {
			t.Fatalf("record %d: got %+v, want %+v", i, n, want[n.Key])
		}
		if i > 0 {
			prev := l.Node(i - 1)
			if c := prev.FirstSeen.Compare(n.FirstSeen); c > 0 || c == 0 && bytes.Compare(prev.Key[:], n.Key[:]) >= 0 {
				t.Fatalf("records %d and %d are out of listing order", i-1, i)
			}
		}
	}
}

// sameNode compares two records, their times as instants.
func sameNode(a, b Node) bool {
	if !a.FirstSeen.Equal(b.FirstSeen) || !a.LastSeen.Equal(b.LastSeen) {
		return false
	}
	a.FirstSeen, a.LastSeen, b.FirstSeen, b.LastSeen = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
