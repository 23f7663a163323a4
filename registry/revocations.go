package registry

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/store"
)

// The revocation list's budgets (docs/protocol.md §8.1). Anyone can make a root key and sign
// revocations with it, so the list is a table strangers grow; an operator's revocation of a
// stolen credential must still get in. A revocation is "proven" when its root key is pinned
// and has logged in here: only such a root key has credentials that a revocation here
// protects against, and proving costs a login, which the login budgets meter. It is "needed"
// when a live bearer session of its root key logged in with the credential it revokes.
//
//   - Every new revocation is refused by its own address's rate, and by what its root key
//     (RevocationsPerRoot), its block and its network hold (RevocationsPerBlock,
//     RevocationsPerNetwork), proven or not. Each refuses that party only: a revocation needs
//     no bearer, so an operator sends it from any address.
//   - An unproven one is refused, besides, by its address block's rate.
//   - When the list is full (MaxRevocations) a newcomer takes the place of the oldest
//     unproven revocation of the whole list, whatever its block; when there is none it is
//     refused, unless it is needed. Unproven revocations expire after RevocationTTL
//     unless their root key proves itself first; proven ones are kept for good.
//
// So the list passes MaxRevocations by needed revocations only, each within its root key's,
// block's and network's holdings: an attacker who makes its own revocations needed (a login
// per revocation) grows the list by at most the networks it holds times their quota.

// admitRevocation decides whether a new revocation by root (whose pin record is pin) of id
// from addr may be recorded, charges its budgets, and makes room for it when the list is full.
func (s *Service) admitRevocation(tx store.Tx, pin store.OperatorPin, root didkey.PublicKey, id, addr string, now time.Time) error {
	proven := pin.LoggedIn()
	block := netblock.BlockOf(addr)
	network := netblock.Of(block, netblock.Network)
	addrKey, blockKey := limits.RevokeCounterPrefix+addr, limits.RevokeCounterPrefix+block
	heldBlock, heldNetwork := limits.RevokeHeldPrefix+block, limits.RevokeHeldPrefix+network
	c, err := tx.Counters(addrKey, blockKey, heldBlock, heldNetwork)
	if err != nil {
		return err
	}
	if c[0].Blocked(now, s.limits.RevokeAddressLimit, limits.RevokeWindow) {
		return budget.RateLimited(budget.LimitRevokePerAddress, "too many new revocations from this address; wait and try again")
	}
	for _, b := range []struct {
		over        bool
		limit, what string
	}{
		{pin.Revocations >= s.limits.RevocationsPerRoot, budget.LimitRevocationsPerRoot, "this root key holds too many revocations"},
		{c[2].Count >= s.limits.RevocationsPerBlock, budget.LimitRevocationsPerBlock, "this address block holds too many revocations"},
		// A quota as large as the list is the list's: full only when the list is.
		{c[3].Count >= s.limits.RevocationsPerNetwork && s.limits.RevocationsPerNetwork < s.limits.MaxRevocations, budget.LimitRevocationsPerNetwork, "this network holds too many revocations"},
	} {
		if b.over {
			return budget.RateLimited(b.limit, b.what)
		}
	}
	if !proven {
		if c[1].Blocked(now, budget.BlockLimit(s.limits.RevokeAddressLimit, s.limits.AddressBlockFactor), limits.RevokeWindow) {
			return budget.RateLimited(budget.LimitRevokePerBlock, "too many new revocations from this address block; wait and try again")
		}
		if err := tx.PutCounter(blockKey, c[1].Fail(now, limits.RevokeWindow)); err != nil {
			return err
		}
	}
	n, err := tx.RevocationCount()
	if err != nil {
		return err
	}
	if n >= s.limits.MaxRevocations {
		if err := s.displaceRevocation(tx, func() (bool, error) { return revocationNeeded(tx, root, id) }); err != nil {
			return err
		}
	}
	if err := tx.PutCounter(addrKey, c[0].Fail(now, limits.RevokeWindow)); err != nil {
		return err
	}
	if err := tx.PutCounter(heldBlock, store.Counter{Count: c[2].Count + 1, Start: now}); err != nil {
		return err
	}
	if err := tx.PutCounter(heldNetwork, store.Counter{Count: c[3].Count + 1, Start: now}); err != nil {
		return err
	}
	pin.Revocations++
	return tx.PutOperatorPin(pin)
}

// revocationNeeded reports whether a live bearer session of root's logged in with a
// credential carrying revocation_id id: the stolen credential in use that a revocation exists
// to stop. Sessions are kept under the operator DID their login named, pinned to its root key
// (pinnedSpellings).
func revocationNeeded(tx store.Tx, root didkey.PublicKey, id string) (bool, error) {
	spellings, err := pinnedSpellings(tx, root)
	if err != nil {
		return false, err
	}
	var needed bool
	for _, did := range spellings {
		err := eachBearerSession(tx, did, func(_ [32]byte, sess authn.BearerSession) (bool, error) {
			needed = sess.RevocationID == id
			return needed, nil
		})
		if err != nil || needed {
			return needed, err
		}
	}
	return false, nil
}

// displaceRevocation removes the oldest unproven revocation of the whole list to make room;
// when there is none, the newcomer is refused unless it is needed.
func (s *Service) displaceRevocation(tx store.Tx, needed func() (bool, error)) error {
	for {
		victim, ok := s.revokeVictims.next()
		if !ok {
			if ok, err := needed(); err != nil || ok {
				return err
			}
			s.capReached(&s.warnRevocations, "revocations", s.limits.MaxRevocations)
			return budget.RateLimited(budget.LimitRevocationList, "the registry's revocation list is full; try again later")
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
		case err == nil && !revokedBy(r, pin.RootKey):
			// The body's record is another root key's: it holds nothing of this revocation.
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
	for _, g := range []string{r.Group, netblock.Of(r.Group, netblock.Network)} {
		if err := countDown(tx, limits.RevokeHeldPrefix+g); err != nil {
			return false, err
		}
	}
	return true, nil
}

// countDown takes one off the holding counted under key, deleting it at zero. A holding
// recorded before its counter existed (a network's, by an earlier release) is never below
// zero.
func countDown(tx store.Tx, key string) error {
	c, err := tx.Counter(key)
	if err != nil {
		return err
	}
	if c.Count <= 1 {
		return tx.DeleteCounter(key)
	}
	c.Count--
	return tx.PutCounter(key, c)
}

// revokeVictim is a displacement candidate: an unproven revocation.
type revokeVictim struct {
	did, id  string
	recorded time.Time
}

// revokeVictims are the displacement candidates the last sweep found: the oldest unproven
// revocations of the list, oldest first.
type revokeVictims struct {
	mu    sync.Mutex
	queue []revokeVictim
}

// next pops the oldest candidate.
func (v *revokeVictims) next() (revokeVictim, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.queue) == 0 {
		return revokeVictim{}, false
	}
	c := v.queue[0]
	v.queue = v.queue[1:]
	return c, true
}

func (v *revokeVictims) set(queue []revokeVictim) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queue = queue
}

// sweepRevocations removes unproven revocations older than RevocationTTL and finds the
// displacement candidates.
func (s *Service) sweepRevocations(ctx context.Context, now time.Time) error {
	expired, err := s.scanRevocations(ctx, now, true)
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
	var n int
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		n, err = tx.RevocationCount()
		return err
	})
	if err != nil || n < s.limits.MaxRevocations-s.limits.MaxRevocations/10 {
		s.revokeVictims.set(nil)
		return err
	}
	_, err = s.scanRevocations(ctx, now, false)
	return err
}

// scanRevocations reads the list once: it keeps the limits.RevokeVictimCount oldest unproven
// revocations as the displacement candidates, and returns, when expire, the unproven ones
// past RevocationTTL (at most limits.RevokeExpiryPerSweep).
func (s *Service) scanRevocations(ctx context.Context, now time.Time, expire bool) ([][2]string, error) {
	ttl := s.limits.RevocationTTL
	var expired [][2]string
	var oldest oldestVictims
	err := s.store.View(ctx, func(tx store.Tx) error {
		expired, oldest = expired[:0], oldest[:0]
		return tx.EachRevocation(func(r store.Revocation) error {
			if !mayGo(r) {
				return nil
			}
			if expire && now.Sub(r.RecordedAt) >= ttl {
				if len(expired) < limits.RevokeExpiryPerSweep {
					expired = append(expired, [2]string{r.OperatorDID, r.RevocationID})
				}
				return nil
			}
			oldest.keep(revokeVictim{did: r.OperatorDID, id: r.RevocationID, recorded: r.RecordedAt})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	queue := []revokeVictim(oldest)
	slices.SortFunc(queue, func(a, b revokeVictim) int { return a.recorded.Compare(b.recorded) })
	s.revokeVictims.set(queue)
	return expired, nil
}

// oldestVictims keeps the limits.RevokeVictimCount oldest candidates it is shown, newest on top of
// a heap, so that finding them costs that many entries of memory however long the list.
type oldestVictims []revokeVictim

func (h oldestVictims) Len() int           { return len(h) }
func (h oldestVictims) Less(i, j int) bool { return h[i].recorded.After(h[j].recorded) }
func (h oldestVictims) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *oldestVictims) Push(x any)        { *h = append(*h, x.(revokeVictim)) }
func (h *oldestVictims) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// keep adds c when it is among the oldest seen.
func (h *oldestVictims) keep(c revokeVictim) {
	if len(*h) < limits.RevokeVictimCount {
		heap.Push(h, c)
		return
	}
	if c.recorded.Before((*h)[0].recorded) {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}
