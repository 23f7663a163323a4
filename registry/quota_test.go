package registry

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/store"
)

var quotaT0 = time.Unix(1e9, 0)

// fill reserves n ids of group in s, each ending in an hour, and fails on a refusal.
func fill(t *testing.T, s *expirySet, group string, n int, q quota) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", group, i)
		if d, why := s.reserve(id, quotaT0.Add(time.Hour), group, q, quotaT0); why != placeTaken || d != "" {
			t.Fatalf("reserve %s: displaced %q, why %d", id, d, why)
		}
		ids = append(ids, id)
	}
	return ids
}

// A group at its quota is refused, and no other group is.
func TestQuotaPerGroup(t *testing.T) {
	s := newExpirySet()
	q := quota{limit: 100, perGroup: 3}
	fill(t, s, "a", 3, q)
	if _, why := s.reserve("a-x", quotaT0.Add(time.Hour), "a", q, quotaT0); why != placeGroup {
		t.Fatalf("a over its quota: why %d; want placeGroup", why)
	}
	fill(t, s, "b", 3, q)
	s.remove("a-0")
	fill(t, s, "a", 1, q) // a-0 again: a place freed is a place again
}

// A full table displaces the least recently used entry of the group holding the most, and
// only for a newcomer whose group holds at least two fewer.
func TestQuotaDisplacementOrder(t *testing.T) {
	s := newExpirySet()
	q := quota{limit: 10, perGroup: 10}
	big := fill(t, s, "big", 6, q)
	mid := fill(t, s, "mid", 3, q)
	fill(t, s, "small", 1, q)
	s.use(big[0]) // big-1 is now its least recently used
	d, why := s.reserve("new-0", quotaT0.Add(time.Hour), "new", q, quotaT0)
	if why != placeTaken || d != big[1] {
		t.Fatalf("newcomer displaced %q (why %d); want %q", d, why, big[1])
	}
	// big holds 5, new 1: new displaces again, then big's next least recently used.
	if d, _ := s.reserve("new-1", quotaT0.Add(time.Hour), "new", q, quotaT0); d != big[2] {
		t.Fatalf("second displacement took %q; want %q", d, big[2])
	}
	// big holds 4, mid 3, new 2, small 1: mid's newcomer is not two fewer than big, refused.
	if _, why := s.reserve("mid-x", quotaT0.Add(time.Hour), "mid", q, quotaT0); why != placeTooFull {
		t.Fatalf("mid at an even share: why %d; want placeTooFull", why)
	}
	// small is two fewer than big: it may displace.
	if d, _ := s.reserve("small-x", quotaT0.Add(time.Hour), "small", q, quotaT0); d != big[3] {
		t.Fatalf("small displaced %q; want %q", d, big[3])
	}
	for _, id := range append(mid, "small-0") {
		if _, ok := s.m[id]; !ok {
			t.Fatalf("%s, of a group never holding the most, was displaced", id)
		}
	}
	if n := s.live(quotaT0); n != q.limit {
		t.Fatalf("live %d; want the limit %d", n, q.limit)
	}
}

// Groups at an even share never displace each other, so a full table of even groups
// refuses; one more group still gets in while some group holds two or more.
func TestQuotaNewGroupNeverShutOut(t *testing.T) {
	s := newExpirySet()
	q := quota{limit: 64, perGroup: 64}
	for g := range 32 {
		fill(t, s, fmt.Sprint("g", g), 2, q)
	}
	for g := range 32 {
		if _, why := s.reserve(fmt.Sprint("x", g), quotaT0.Add(time.Hour), fmt.Sprint("g", g), q, quotaT0); why != placeTooFull {
			t.Fatalf("g%d at an even share: why %d; want placeTooFull", g, why)
		}
	}
	if d, why := s.reserve("honest", quotaT0.Add(time.Hour), "honest", q, quotaT0); why != placeTaken || d == "" {
		t.Fatalf("a new group was shut out: displaced %q, why %d", d, why)
	}
}

// Whatever is reserved, used, removed or expired, each group's count and the group holding
// the most agree with the live ids.
func TestQuotaHoldsAgreeWithSet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newExpirySet()
		q := quota{limit: rapid.IntRange(1, 20).Draw(t, "limit"), perGroup: rapid.IntRange(1, 20).Draw(t, "perGroup")}
		now := quotaT0
		n := 0
		for range rapid.IntRange(0, 200).Draw(t, "ops") {
			g := fmt.Sprint("g", rapid.IntRange(0, 4).Draw(t, "group"))
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				n++
				end := now.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "ttl")) * time.Second)
				s.reserve(fmt.Sprint("id", n), end, g, q, now)
			case 2:
				s.remove(fmt.Sprint("id", rapid.IntRange(0, n).Draw(t, "victim")))
			case 3:
				now = now.Add(time.Duration(rapid.IntRange(0, 30).Draw(t, "step")) * time.Second)
			}
			live := s.live(now)
			if live > q.limit {
				t.Fatalf("live %d over the limit %d", live, q.limit)
			}
			want := map[string]int{}
			most := 0
			for id := range s.m {
				el, ok := s.holds.byID[id]
				if !ok {
					t.Fatalf("%s is live and held by no group", id)
				}
				name := el.Value.(*heldID).group.name
				want[name]++
				most = max(most, want[name])
			}
			if len(s.holds.byID) != len(s.m) {
				t.Fatalf("groups hold %d ids; the set %d", len(s.holds.byID), len(s.m))
			}
			for name, c := range want {
				if got := s.holds.count(name); got != c || c > q.perGroup {
					t.Fatalf("group %s holds %d; want %d (quota %d)", name, got, c, q.perGroup)
				}
			}
			if most > 0 && s.holds.top[0].lru.Len() != most {
				t.Fatalf("top group holds %d; the most is %d", s.holds.top[0].lru.Len(), most)
			}
		}
	})
}

// An operator at its quota of sessions keeps logging in: each login ends its oldest session,
// and the operator never holds more than the quota.
func TestBearerQuotaPerOperatorEndsOldest(t *testing.T) {
	s, now := quotaService(t, Limits{MaxBearerSessionsPerOperator: 2})
	ctx := context.Background()
	var hashes [][32]byte
	for i := range 4 {
		var h [32]byte
		h[0] = byte(i + 1)
		*now = now.Add(time.Second)
		err := s.store.Update(ctx, func(tx store.Tx) error {
			if err := s.holdBearer(tx, "did:svrp:o:0a1b2c3d", ""); err != nil {
				return err
			}
			return tx.PutBearerSession(h, authn.NewBearerSession("did:svrp:o:0a1b2c3d", *now))
		})
		if err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		hashes = append(hashes, h)
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		mine, err := tx.BearerSessionsOf("did:svrp:o:0a1b2c3d")
		if err != nil {
			return err
		}
		if len(mine) != 2 {
			t.Fatalf("the operator holds %d sessions; want its quota 2", len(mine))
		}
		for i, h := range hashes {
			_, err := tx.BearerSession(h)
			if alive := err == nil; alive != (i >= 2) {
				t.Errorf("session %d alive %v; want only the two newest", i, alive)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sessionReads counts the bearer sessions read through it.
type sessionReads struct {
	store.Tx
	n *int
}

func (r sessionReads) BearerSession(h [32]byte) (authn.BearerSession, error) {
	*r.n++
	return r.Tx.BearerSession(h)
}

// TestOldestBearerReadsOnlyWhatMemoryLacks: the oldest of an operator's sessions is found
// from the ends the bearer table holds; only a session it does not hold (another daemon's,
// since the last count) is read from the store.
func TestOldestBearerReadsOnlyWhatMemoryLacks(t *testing.T) {
	s, now := quotaService(t, Limits{})
	ctx := context.Background()
	const op = "did:svrp:o:0a1b2c3d"
	var hashes [][32]byte
	for i := range 4 {
		var h [32]byte
		h[0] = byte(i + 1)
		sess := authn.NewBearerSession(op, now.Add(time.Duration(i)*time.Minute))
		if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.PutBearerSession(h, sess) }); err != nil {
			t.Fatal(err)
		}
		if i != 2 {
			s.bearers.add(hex.EncodeToString(h[:]), sess.ExpiresAt, "192.0.2.0")
		}
		hashes = append(hashes, h)
	}
	for _, order := range [][]int{{3, 2, 1, 0}, {2, 0, 3, 1}} {
		var in [][32]byte
		for _, i := range order {
			in = append(in, hashes[i])
		}
		reads := 0
		err := s.store.View(ctx, func(tx store.Tx) error {
			got, err := s.oldestBearer(sessionReads{Tx: tx, n: &reads}, in)
			if got != hashes[0] {
				t.Errorf("order %v: oldest is session %d; want 0", order, got[0]-1)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if reads != 1 {
			t.Errorf("order %v: %d sessions read from the store; want 1, the one the table does not hold", order, reads)
		}
	}
}
