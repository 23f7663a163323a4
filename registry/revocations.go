package registry

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/store"
)

// The revocation list's budgets (docs/protocol.md §8.1). Anyone can make a root key and sign
// revocations with it, so the list is a table strangers grow; an operator's revocation of a
// stolen credential must still get in. A revocation is "proven" when its root key is pinned
// and has logged in here: only such a root key has credentials that a revocation here
// protects against, and proving costs a login, which the login budgets meter.
//
//   - A proven revocation is refused only by what its own address, block and root key hold
//     or spent: its address's rate, its block's holdings (RevocationsPerBlock) and its root
//     key's (RevocationsPerRoot). It never expires and is never displaced.
//   - An unproven one is refused, besides, by its address block's rate; and when the list is
//     full (MaxRevocations) it takes the place of the oldest unproven revocation of the
//     block holding most, if its own block holds less. It expires after RevocationTTLHours
//     unless its root key proves itself first.

// admitRevocation decides whether a new revocation by pin's root key from addr may be
// recorded, charges its budgets, and makes room for it when the list is full.
func (s *Service) admitRevocation(tx store.Tx, pin store.OperatorPin, addr string, now time.Time) error {
	proven := pin.LoggedIn()
	if pin.Revocations >= s.limits.RevocationsPerRoot {
		return rateLimited(LimitRevocationsPerRoot, "this root key holds too many revocations")
	}
	group := AddressBlock(addr)
	addrKey, blockKey, heldKey := revokeCounterPrefix+addr, revokeCounterPrefix+group, revokeHeldPrefix+group
	c, err := tx.Counters(addrKey, blockKey, heldKey)
	if err != nil {
		return err
	}
	if c[0].Blocked(now, s.limits.RevokeAddressLimit, revokeWindow) {
		return rateLimited(LimitRevokePerAddress, "too many new revocations from this address; wait and try again")
	}
	if c[2].Count >= s.limits.RevocationsPerBlock {
		return rateLimited(LimitRevocationsPerBlock, "this address block holds too many revocations")
	}
	if !proven {
		if c[1].Blocked(now, blockLimit(s.limits.RevokeAddressLimit, s.limits.AddressBlockFactor), revokeWindow) {
			return rateLimited(LimitRevokePerBlock, "too many new revocations from this address block; wait and try again")
		}
		n, err := tx.RevocationCount()
		if err != nil {
			return err
		}
		if n >= s.limits.MaxRevocations {
			if err := s.displaceRevocation(tx, group, c[2].Count); err != nil {
				return err
			}
		}
		if err := tx.PutCounter(blockKey, c[1].Fail(now, revokeWindow)); err != nil {
			return err
		}
	}
	if err := tx.PutCounter(addrKey, c[0].Fail(now, revokeWindow)); err != nil {
		return err
	}
	if err := tx.PutCounter(heldKey, binding.Counter{Count: c[2].Count + 1, Start: now}); err != nil {
		return err
	}
	pin.Revocations++
	return tx.PutOperatorPin(pin)
}

// displaceRevocation removes the oldest unproven revocation of the block holding most, when
// that block holds more than group, which holds held; otherwise the list is full for group.
func (s *Service) displaceRevocation(tx store.Tx, group string, held int) error {
	for {
		victim, ok := s.revokeVictims.next(group)
		if !ok {
			s.capReached(&s.warnRevocations, "revocations", s.limits.MaxRevocations)
			return rateLimited(LimitRevocationList, "the registry's revocation list is full; try again later")
		}
		c, err := tx.Counter(revokeHeldPrefix + victim.group)
		if err != nil {
			return err
		}
		if c.Count <= held+1 {
			// The block holding most holds no more than this one would: nothing gives way.
			s.revokeVictims.putBack(victim)
			s.capReached(&s.warnRevocations, "revocations", s.limits.MaxRevocations)
			return rateLimited(LimitRevocationList, "the registry's revocation list is full; try again later")
		}
		removed, err := removeUnproven(tx, victim.did, victim.id)
		if err != nil || removed {
			return err
		}
	}
}

// mayGo reports whether a revocation may expire or give way, as far as its record tells: one
// recorded before the list had quotas has no group and is kept as proven, since its root key
// may have logged in before pins were recorded.
func mayGo(r store.Revocation) bool { return !r.Proven && r.Group != "" }

// removeUnproven deletes the revocation (did, id) unless it is gone or its root key has
// logged in since, counting it out of its block's and root key's holdings. A revocation
// whose root key has logged in since is marked proven instead, so that it is not looked at
// again.
func removeUnproven(tx store.Tx, did, id string) (bool, error) {
	r, err := tx.Revocation(did, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !mayGo(r) {
		return false, nil
	}
	d, perr := didkey.Parse(did)
	var pin store.OperatorPin
	pinned := false
	if perr == nil {
		pin, err = tx.OperatorPin(d.Body())
		switch {
		case err == nil:
			if pin.LoggedIn() {
				r.Proven = true
				return false, tx.PutRevocation(r)
			}
			pinned = true
		case !errors.Is(err, store.ErrNotFound):
			return false, err
		}
	}
	if err := tx.DeleteRevocation(did, id); err != nil {
		return false, err
	}
	if err := logUnrevoke(tx, r); err != nil {
		return false, err
	}
	if pinned && pin.Revocations > 0 {
		pin.Revocations--
		if err := tx.PutOperatorPin(pin); err != nil {
			return false, err
		}
	}
	c, err := tx.Counter(revokeHeldPrefix + r.Group)
	if err != nil {
		return false, err
	}
	if c.Count <= 1 {
		return true, tx.DeleteCounter(revokeHeldPrefix + r.Group)
	}
	c.Count--
	return true, tx.PutCounter(revokeHeldPrefix+r.Group, c)
}

// revokeVictim is a displacement candidate: an unproven revocation of a block holding many.
type revokeVictim struct {
	group, did, id string
	recorded       time.Time
}

// revokeVictims are the displacement candidates the last sweep found, oldest first within
// each block, blocks holding most first.
type revokeVictims struct {
	mu     sync.Mutex
	groups [][]revokeVictim
}

// next pops the oldest candidate of the first block other than group that has one.
func (v *revokeVictims) next(group string) (revokeVictim, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, g := range v.groups {
		if len(g) == 0 || g[0].group == group {
			continue
		}
		v.groups[i] = g[1:]
		return g[0], true
	}
	return revokeVictim{}, false
}

// putBack returns a candidate next did not use.
func (v *revokeVictims) putBack(c revokeVictim) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, g := range v.groups {
		if len(g) == 0 || g[0].group == c.group {
			v.groups[i] = append([]revokeVictim{c}, g...)
			return
		}
	}
}

func (v *revokeVictims) set(groups [][]revokeVictim) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.groups = groups
}

// sweepRevocations removes unproven revocations older than RevocationTTLHours and finds the
// displacement candidates of the blocks holding most, top (as the sweep's read of the
// counters found them).
func (s *Service) sweepRevocations(ctx context.Context, top map[string]int, now time.Time) error {
	expired, err := s.scanRevocations(ctx, top, now, true)
	if err != nil {
		return err
	}
	for batch := range slices.Chunk(expired, sweepBatch) {
		if err := s.store.Update(ctx, func(tx store.Tx) error {
			for _, k := range batch {
				if _, err := removeUnproven(tx, k[0], k[1]); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// recountRevocations finds the displacement candidates, as a sweep does, on a daemon that
// another is sweeping for, so that every daemon sharing a store can admit a newcomer to a
// full list. It reads the list only when the list is nearly full: before, nothing gives way.
func (s *Service) recountRevocations(ctx context.Context, now time.Time) error {
	top := newTopHeld(revokeVictimGroups)
	near := false
	err := s.store.View(ctx, func(tx store.Tx) error {
		top.reset()
		n, err := tx.RevocationCount()
		if err != nil {
			return err
		}
		if near = n >= s.limits.MaxRevocations-s.limits.MaxRevocations/10; !near {
			return nil
		}
		return tx.EachCounter(func(key string, c binding.Counter) error {
			if g, ok := strings.CutPrefix(key, revokeHeldPrefix); ok {
				top.add(g, c.Count)
			}
			return nil
		})
	})
	if err != nil || !near {
		s.revokeVictims.set(nil)
		return err
	}
	_, err = s.scanRevocations(ctx, top.held, now, false)
	return err
}

// scanRevocations reads the list once: it keeps the oldest unproven revocations of the blocks
// in top as the displacement candidates, and returns, when expire, the unproven ones past
// RevocationTTLHours (at most revokeExpiryPerSweep).
func (s *Service) scanRevocations(ctx context.Context, top map[string]int, now time.Time, expire bool) ([][2]string, error) {
	ttl := time.Duration(s.limits.RevocationTTLHours) * time.Hour
	var expired [][2]string
	cands := make(map[string][]revokeVictim, len(top))
	err := s.store.View(ctx, func(tx store.Tx) error {
		expired = expired[:0]
		clear(cands)
		return tx.EachRevocation(func(r store.Revocation) error {
			if !mayGo(r) {
				return nil
			}
			if expire && now.Sub(r.RecordedAt) >= ttl {
				if len(expired) < revokeExpiryPerSweep {
					expired = append(expired, [2]string{r.OperatorDID, r.RevocationID})
				}
				return nil
			}
			if _, ok := top[r.Group]; ok {
				cands[r.Group] = keepOldest(cands[r.Group], revokeVictim{group: r.Group, did: r.OperatorDID, id: r.RevocationID, recorded: r.RecordedAt})
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	groups := make([][]revokeVictim, 0, len(cands))
	for _, g := range cands {
		slices.SortFunc(g, func(a, b revokeVictim) int { return a.recorded.Compare(b.recorded) })
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b []revokeVictim) int { return cmp.Compare(top[b[0].group], top[a[0].group]) })
	s.revokeVictims.set(groups)
	return expired, nil
}

// keepOldest adds c to the candidates of one block, keeping the revokeVictimsPerGroup oldest.
func keepOldest(g []revokeVictim, c revokeVictim) []revokeVictim {
	if len(g) < revokeVictimsPerGroup {
		return append(g, c)
	}
	newest := 0
	for i := range g {
		if g[i].recorded.After(g[newest].recorded) {
			newest = i
		}
	}
	if c.recorded.Before(g[newest].recorded) {
		g[newest] = c
	}
	return g
}

// topHeld keeps the n address blocks holding most revocations among those it is shown, so
// that finding them costs n entries of memory however many blocks hold some.
type topHeld struct {
	n    int
	held map[string]int
}

func newTopHeld(n int) *topHeld { return &topHeld{n: n, held: make(map[string]int, n)} }

func (t *topHeld) reset() { clear(t.held) }

func (t *topHeld) add(group string, count int) {
	if len(t.held) < t.n {
		t.held[group] = count
		return
	}
	least, min := "", 0
	for g, c := range t.held {
		if least == "" || c < min {
			least, min = g, c
		}
	}
	if count > min {
		delete(t.held, least)
		t.held[group] = count
	}
}
