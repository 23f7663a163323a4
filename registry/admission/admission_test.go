package admission_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/registry/admission"
	"github.com/svrp/svrp/registry/netblock"
)

var t0 = time.Unix(1_800_000_000, 0)

const idle = 10 * time.Minute

// world is a table and what its caller's store would say of each entry: when it was last
// used, and whether its owner keeps it.
type world struct {
	tab  *admission.Table[string]
	used map[string]time.Time
	kept map[string]bool
	from map[string]string
}

func newWorld(q admission.Quota, idle time.Duration) *world {
	return &world{tab: admission.New[string]("things", q, idle), used: map[string]time.Time{}, kept: map[string]bool{}, from: map[string]string{}}
}

// admit runs a newcomer's admission as a registry's write would: reserve, walk the
// candidates checking each against the store, remove the victim, commit.
func (w *world) admit(id, origin string, now time.Time) (victim string, err error) {
	r := w.tab.Reserve(origin, now)
	if r.NeedsVictim() {
		for {
			c, ok := r.Next()
			if !ok {
				r.Cancel()
				return "", r.Refusal()
			}
			if w.kept[c] || now.Sub(w.used[c]) < idle {
				r.Pass(c, w.used[c], w.kept[c])
				continue
			}
			r.Take(c)
			victim = c
			delete(w.used, c)
			break
		}
	}
	w.used[id], w.from[id] = now, origin
	r.Commit(id, now, time.Time{})
	return victim, nil
}

// heartbeat is an entry used again, which only the store learns of.
func (w *world) heartbeat(id string, now time.Time) { w.used[id] = now }

func quota(cap, client, block, network int) admission.Quota {
	return admission.Quota{Cap: cap, PerGroup: [3]int{client, block, network}}
}

// TestSpreadThin: an attacker holding one entry in each of many /24s makes no honest /24
// "the group holding the most": a full table of live entries refuses the newcomer and
// displaces no one; once the attacker's entries go stale, they make the room.
func TestSpreadThin(t *testing.T) {
	w := newWorld(quota(60, 60, 60, 60), idle)
	now := t0
	for i := range 12 {
		mustAdmit(t, w, fmt.Sprintf("honest-%d", i), fmt.Sprintf("203.0.113.%d", i+1), now)
	}
	for i := range 48 {
		mustAdmit(t, w, fmt.Sprintf("attacker-%d", i), fmt.Sprintf("198.%d.7.1", i), now)
	}
	now = now.Add(20 * time.Minute)
	for i := range 12 {
		w.heartbeat(fmt.Sprintf("honest-%d", i), now) // the honest nodes keep heartbeating
	}
	for i := range 20 {
		v, err := w.admit(fmt.Sprintf("new-%d", i), fmt.Sprintf("192.0.%d.1", i), now)
		if err != nil {
			t.Fatalf("newcomer %d refused while the attacker's entries are stale: %v", i, err)
		}
		if v[:8] != "attacker" {
			t.Fatalf("newcomer %d displaced %s", i, v)
		}
	}
	// Now every entry is in use: the next newcomer waits, and nothing is displaced.
	for id := range w.used {
		w.heartbeat(id, now)
	}
	_, err := w.admit("late", "192.0.99.1", now)
	var ref *admission.Refusal
	if !errors.As(err, &ref) || !ref.Full || ref.RetryAfter <= 0 {
		t.Fatalf("newcomer to a table of live entries: %v; want a Full refusal with a Retry-After", err)
	}
	if got := w.tab.Len(now); got != 60 {
		t.Fatalf("table holds %d after the refusal; want 60", got)
	}
	for i := range 12 {
		if !w.tab.Has(fmt.Sprintf("honest-%d", i), now) {
			t.Fatalf("honest-%d was displaced", i)
		}
	}
}

// TestOwnGroupPays: a newcomer whose group is at its quota takes the place of its own
// group's stalest entry, never another group's, and waits when all of them are in use.
func TestOwnGroupPays(t *testing.T) {
	w := newWorld(quota(100, 100, 3, 100), idle)
	now := t0
	for i := range 3 {
		mustAdmit(t, w, fmt.Sprintf("a%d", i), fmt.Sprintf("192.0.2.%d", i+1), now.Add(time.Duration(i)*time.Second))
	}
	mustAdmit(t, w, "other", "192.0.3.1", now)
	now = now.Add(time.Hour)
	w.heartbeat("a0", now)
	v, err := w.admit("a3", "192.0.2.9", now)
	if err != nil || v != "a1" {
		t.Fatalf("newcomer of a full /24: displaced %q, %v; want the block's stalest unused entry a1", v, err)
	}
	w.heartbeat("a2", now)
	_, err = w.admit("a4", "192.0.2.10", now)
	var ref *admission.Refusal
	if !errors.As(err, &ref) || ref.Full || ref.Level != netblock.Block {
		t.Fatalf("newcomer of a /24 whose entries are in use: %v; want a refusal at the block level", err)
	}
	if !w.tab.Has("other", now) {
		t.Fatal("another block's stale entry paid for a full block")
	}
}

// TestEvenShare: one entry in each of many /24s of one /16 meets the /16's quota, so that
// the attacker's spread buys nothing and a newcomer from another /16 is admitted.
func TestEvenShare(t *testing.T) {
	for _, c := range []struct{ attacker, honest func(i int) string }{
		{func(i int) string { return fmt.Sprintf("198.51.%d.1", i) }, func(i int) string { return fmt.Sprintf("203.%d.0.1", i) }},
		{func(i int) string { return fmt.Sprintf("2001:db8:%x::/64", i) }, func(i int) string { return fmt.Sprintf("2001:%x::/64", 0x1000+i) }},
	} {
		w := newWorld(quota(64, 64, 64, 16), idle)
		now := t0
		refused := 0
		for i := range 64 {
			if _, err := w.admit(fmt.Sprintf("attacker-%d", i), c.attacker(i), now); err != nil {
				refused++
			}
		}
		if refused != 48 {
			t.Fatalf("the attacker's network got %d places; want its quota of 16", 64-refused)
		}
		for i := range 10 {
			mustAdmit(t, w, fmt.Sprintf("honest-%d", i), c.honest(i), now)
		}
	}
}

// TestKeptNeverPays: a kept entry (a bound node) is never offered, however stale; the
// newcomer is refused rather than displace it, and its Retry-After is bounded.
func TestKeptNeverPays(t *testing.T) {
	w := newWorld(quota(4, 4, 4, 4), idle)
	for i := range 4 {
		id := fmt.Sprintf("bound-%d", i)
		mustAdmit(t, w, id, fmt.Sprintf("192.0.2.%d", i+1), t0)
		w.kept[id] = true
	}
	now := t0.Add(24 * time.Hour)
	_, err := w.admit("new", "198.51.100.1", now)
	var ref *admission.Refusal
	if !errors.As(err, &ref) || !ref.Full || ref.RetryAfter > time.Hour {
		t.Fatalf("newcomer to a table of kept entries: %v", err)
	}
	// Learned once, a kept entry is not offered again.
	r := w.tab.Reserve("198.51.100.2", now.Add(time.Hour))
	defer r.Cancel()
	if id, ok := r.Next(); ok {
		t.Fatalf("kept entry %s offered again", id)
	}
}

// TestRetryAfter: a table whose entries end and are never idle (open binding sessions)
// refuses with the time until the first ends.
func TestRetryAfter(t *testing.T) {
	tab := admission.New[string]("sessions", quota(2, 2, 2, 2), 0)
	for i, end := range []time.Duration{7 * time.Minute, 3 * time.Minute} {
		r := tab.Reserve("192.0.2.1", t0)
		if r.NeedsVictim() {
			t.Fatalf("entry %d needs a victim in an empty table", i)
		}
		r.Commit(fmt.Sprint(i), t0, t0.Add(end))
	}
	now := t0.Add(time.Minute)
	err := tab.Room("198.51.100.1", now)
	var ref *admission.Refusal
	if !errors.As(err, &ref) || ref.RetryAfter != 2*time.Minute {
		t.Fatalf("Room in a full table: %v; want a refusal asking for 2m", err)
	}
	if err := tab.Room("198.51.100.1", t0.Add(3*time.Minute)); err != nil {
		t.Fatalf("Room once an entry ended: %v", err)
	}
}

// TestCount: a count from the store brings in what others added, forgets what they removed,
// and leaves what this process changed meanwhile as memory has it.
func TestCount(t *testing.T) {
	tab := admission.New[string]("things", quota(100, 100, 100, 100), idle)
	tab.Add("mine", "192.0.2.1", t0, time.Time{})
	tab.Add("gone-elsewhere", "192.0.2.2", t0, time.Time{})
	tab.BeginCount()
	tab.Counted("mine", "192.0.2.1", t0, time.Time{})
	tab.Counted("theirs", "192.0.2.3", t0, time.Time{})
	tab.Counted("removed-meanwhile", "192.0.2.4", t0, time.Time{})
	tab.Remove("removed-meanwhile")
	tab.Add("added-meanwhile", "192.0.2.5", t0, time.Time{})
	tab.Counted("removed-meanwhile", "192.0.2.4", t0, time.Time{})
	tab.EndCount(true, t0)
	for id, want := range map[string]bool{"mine": true, "theirs": true, "added-meanwhile": true, "gone-elsewhere": false, "removed-meanwhile": false} {
		if got := tab.Has(id, t0); got != want {
			t.Errorf("after the count, holds %s: %v; want %v", id, got, want)
		}
	}
	if got := tab.Held("192.0.2.9", netblock.Block, t0); got != 3 {
		t.Errorf("block holds %d; want 3", got)
	}
	// A count that failed forgets nothing.
	tab.BeginCount()
	tab.EndCount(false, t0)
	if got := tab.Len(t0); got != 3 {
		t.Errorf("after a failed count the table holds %d; want 3", got)
	}
}

func mustAdmit(t *testing.T, w *world, id, origin string, now time.Time) {
	t.Helper()
	if v, err := w.admit(id, origin, now); err != nil || v != "" {
		t.Fatalf("admit %s from %s: displaced %q, %v", id, origin, v, err)
	}
}

// TestProperties: whatever newcomers, uses, keeps and removals come in whatever order, no
// entry in use or kept is ever displaced, every group and the table stay within their
// quota, and a newcomer is refused only when no entry it could displace is stale.
func TestProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q := quota(rapid.IntRange(1, 12).Draw(rt, "cap"), rapid.IntRange(1, 6).Draw(rt, "client"),
			rapid.IntRange(1, 8).Draw(rt, "block"), rapid.IntRange(1, 10).Draw(rt, "network"))
		w := newWorld(q, idle)
		now := t0
		origin := rapid.SampledFrom([]string{"192.0.2.1", "192.0.2.2", "192.0.3.1", "192.1.0.1", "198.51.100.1", "2001:db8:1:1::/64", "2001:db8:2::/64"})
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"admit": func(rt *rapid.T) {
				id := fmt.Sprint("e", n)
				n++
				from := origin.Draw(rt, "origin")
				before := map[string]bool{}
				for id := range w.used {
					before[id] = true
				}
				v, err := w.admit(id, from, now)
				if v != "" && (w.kept[v] || !before[v]) {
					rt.Fatalf("displaced %s, kept or unknown", v)
				}
				if err != nil {
					// Refused: then no entry that could have made room is stale.
					for e := range w.used {
						if w.kept[e] || now.Sub(w.used[e]) < idle {
							continue
						}
						if sameGroupOrCap(q, w, e, from) {
							rt.Fatalf("refused %s from %s (%v) while %s from %s was stale", id, from, err, e, w.from[e])
						}
					}
				}
			},
			"use": func(rt *rapid.T) {
				if len(w.used) > 0 {
					id := rapid.SampledFrom(keys(w.used)).Draw(rt, "used")
					w.heartbeat(id, now)
				}
			},
			"keep": func(rt *rapid.T) {
				if len(w.used) > 0 {
					id := rapid.SampledFrom(keys(w.used)).Draw(rt, "kept")
					w.kept[id] = !w.kept[id]
					w.tab.Keep(id, w.kept[id])
				}
			},
			"wait": func(rt *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(1, 900).Draw(rt, "seconds")) * time.Second)
			},
			"": func(rt *rapid.T) {
				if got := w.tab.Len(now); got != len(w.used) || got > q.Cap {
					rt.Fatalf("table holds %d; the store %d, cap %d", got, len(w.used), q.Cap)
				}
				for e := range w.used {
					for _, l := range netblock.All {
						if got := w.tab.Held(w.from[e], l, now); got > q.PerGroup[l] {
							rt.Fatalf("%v group of %s holds %d, quota %d", l, w.from[e], got, q.PerGroup[l])
						}
					}
				}
			},
		})
	})
}

// sameGroupOrCap reports whether stale entry e could have made room for a newcomer from
// origin: it shares the newcomer's narrowest full group or, when no group is full, the table
// is what is full.
func sameGroupOrCap(q admission.Quota, w *world, e, origin string) bool {
	count := func(l netblock.Level, g string) int {
		n := 0
		for id := range w.used {
			if netblock.Of(w.from[id], l) == g {
				n++
			}
		}
		return n
	}
	for _, l := range netblock.All {
		g := netblock.Of(origin, l)
		if count(l, g) >= q.PerGroup[l] {
			return netblock.Of(w.from[e], l) == g
		}
	}
	return true
}

func keys(m map[string]time.Time) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	// Sorted, so that rapid's draws replay.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestOwn: when every entry is in use, a newcomer may give up one of its own owner's entries
// — the least recently used that makes its place — and never another's.
func TestOwn(t *testing.T) {
	tab := admission.New[string]("sessions", quota(3, 3, 2, 3), time.Hour)
	for i, from := range []string{"192.0.2.1", "192.0.2.2", "198.51.100.1"} {
		r := tab.Reserve(from, t0.Add(time.Duration(i)*time.Second))
		r.Commit(fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Second), time.Time{})
	}
	// The /24 192.0.2.0 is at its quota of 2; its newcomer owns s2 (another block) and s1.
	r := tab.Reserve("192.0.2.3", t0.Add(time.Minute))
	if !r.NeedsVictim() {
		t.Fatal("a full block's newcomer needs no victim")
	}
	if _, ok := r.Next(); ok {
		t.Fatal("an entry in use was offered")
	}
	if id, ok := r.Own([]string{"s2"}); ok {
		t.Fatalf("own entry %s of another block offered for a full block", id)
	}
	if id, ok := r.Own([]string{"s2", "s1"}); !ok || id != "s1" {
		t.Fatalf("own entries s2, s1: offered %q, %v; want s1", id, ok)
	}
	r.Commit("s3", t0.Add(time.Minute), time.Time{})
	if tab.Has("s1", t0.Add(time.Minute)) || !tab.Has("s0", t0.Add(time.Minute)) || tab.Len(t0.Add(time.Minute)) != 3 {
		t.Fatal("the own entry taken was not the one removed")
	}
}

// TestConcurrentNewcomers: newcomers admitted at once, some of whose writes fail, never pass
// the cap or a quota together, and each place taken is settled once.
func TestConcurrentNewcomers(t *testing.T) {
	tab := admission.New[string]("things", quota(50, 50, 20, 50), idle)
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[string]bool{}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				id := fmt.Sprintf("w%d-%d", w, i)
				r := tab.Reserve(fmt.Sprintf("192.0.%d.%d", i%4, w+1), t0)
				if r.NeedsVictim() || i%5 == 0 {
					r.Cancel() // refused, or its write failed
					continue
				}
				r.Commit(id, t0, time.Time{})
				mu.Lock()
				held[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got := tab.Len(t0); got != len(held) || got > 50 {
		t.Fatalf("table holds %d, committed %d, cap 50", got, len(held))
	}
	for b := range 4 {
		if got := tab.Held(fmt.Sprintf("192.0.%d.9", b), netblock.Block, t0); got > 20 {
			t.Fatalf("block %d holds %d, quota 20", b, got)
		}
	}
}

// TestKeptOfferedLast: after a count, which forgets what keeps entries, an entry kept before
// is offered again only after every other stale entry, however stale it is.
func TestKeptOfferedLast(t *testing.T) {
	tab := admission.New[string]("things", quota(10, 10, 10, 10), idle)
	tab.Add("bound", "192.0.2.1", t0, time.Time{})
	tab.Add("quiet", "192.0.2.2", t0.Add(time.Minute), time.Time{})
	tab.Keep("bound", true)
	now := t0.Add(time.Hour)
	tab.BeginCount()
	tab.Counted("bound", "192.0.2.1", t0, time.Time{})
	tab.Counted("quiet", "192.0.2.2", t0.Add(time.Minute), time.Time{})
	tab.EndCount(true, now)
	r := tab.Reserve("198.51.100.1", now)
	defer r.Cancel()
	var order []string
	for range 2 {
		id, ok := r.Next()
		if !ok {
			break
		}
		order = append(order, id)
	}
	if fmt.Sprint(order) != "[quiet bound]" {
		t.Fatalf("offered %v; want the entry kept before last", order)
	}
}
