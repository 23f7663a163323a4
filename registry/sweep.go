package registry

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// Sweep makes durable what time has already decided: non-terminal binding sessions past
// expires_at become EXPIRED, sessions terminal for binding.MinTerminalRetention are deleted
// (their ids stay reserved), and bearer sessions, counters and heartbeat marks whose windows
// are over are removed. Reads apply expiry on their own, so Sweep only keeps the store tidy
// and bounded; [Service.Run] calls it every [Config.SweepEvery].
//
// It ends the bindings of nodes unseen for [Limits.BoundNodeExpiry] (unseen.go) before it
// removes the unbound nodes unseen for [Limits.NodeExpiry].
//
// A sweep also counts again, from the store, what the global caps count in memory (node
// records, open binding sessions, live bearer sessions), so that on a store shared by several
// daemons each sees what the others added at least once a sweep interval (package registry/limits); and it
// expires unproven revocations and finds the revocations that may give way (revocations.go).
func (s *Service) Sweep(ctx context.Context) error {
	now := s.now()
	s.heartbeats.Prune(now)
	// One scan of the node table serves both expiries and the node table's count, which
	// finds the others' records on a shared store and the stale ones on any. Bindings of
	// nodes unseen too long end first, so that a node unseen for the node expiry too goes
	// in this sweep.
	unseen, err := s.unseenSince(ctx, now.Add(-min(s.nodeExpiry(), s.limits.BoundNodeExpiry)))
	if err != nil {
		return err
	}
	if err := s.endUnseenBindings(ctx, unseen, now); err != nil {
		return err
	}
	if err := s.expireNodes(ctx, unseen, now); err != nil {
		return err
	}
	var expired []binding.BindingSession
	var retired []string
	var deadTokens [][32]byte
	var deadCounters []string
	live := s.beginSessionCount()
	err = s.store.View(ctx, func(tx store.Tx) error {
		live.reset()
		if err := tx.EachBindingSession(func(sess binding.BindingSession) error {
			live.session(sess, now)
			next := binding.ExpireIfDue(sess, now)
			due, err := retirable(tx, next, now)
			if err != nil {
				return err
			}
			switch {
			case due:
				retired = append(retired, sess.ID)
			case next.State != sess.State:
				expired = append(expired, next)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.EachBearerSession(func(h [32]byte, sess authn.BearerSession) error {
			live.bearer(h, sess, now)
			if sess.Check(now) != nil {
				deadTokens = append(deadTokens, h)
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.EachCounter(func(key string, c store.Counter) error {
			if now.Sub(c.Start) >= counterWindow(key) {
				deadCounters = append(deadCounters, key)
			}
			return nil
		})
	})
	live.end(err, now)
	if err != nil {
		return err
	}
	for _, sess := range expired {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			cur, err := tx.BindingSession(sess.ID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if next := binding.ExpireIfDue(cur, now); next.State != cur.State {
				return tx.PutBindingSession(next)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Deletions go in batches, so a backlog (a first sweep after an upgrade) neither makes
	// one huge transaction nor one per session.
	for batch := range slices.Chunk(retired, sweepBatch) {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			for _, id := range batch {
				cur, err := tx.BindingSession(id)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if due, err := retirable(tx, binding.ExpireIfDue(cur, now), now); err != nil {
					return err
				} else if !due {
					continue
				}
				if err := tx.DeleteBindingSession(id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for batch := range slices.Chunk(deadTokens, sweepBatch) {
		if err := s.store.Update(ctx, func(tx store.Tx) error {
			for _, h := range batch {
				if err := tx.DeleteBearerSession(h); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// A counter is read again before it goes: on a store shared by several daemons another
	// may have started a new window since the read above.
	for batch := range slices.Chunk(deadCounters, sweepBatch) {
		if err = s.store.Update(ctx, func(tx store.Tx) error {
			for _, k := range batch {
				c, err := tx.Counter(k)
				if err != nil {
					return err
				}
				if now.Sub(c.Start) < counterWindow(k) {
					continue
				}
				if err := tx.DeleteCounter(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err == nil {
		err = s.sweepRevocations(ctx, now)
	}
	if n := len(expired) + len(retired) + len(deadTokens) + len(deadCounters); n > 0 && err == nil {
		s.log.Debug("sweep", "expired_sessions", len(expired), "deleted_sessions", len(retired), "ended_bearer_sessions", len(deadTokens), "ended_counters", len(deadCounters))
	}
	return err
}

// Recount counts again, from the store, what the global caps count in memory, as Sweep
// does. On a store shared by several daemons, the daemon that finds another sweeping calls
// it instead of Sweep, so that its counts are no older than a sweep interval either, and
// that it too knows which revocations may give way to a newcomer on a full list.
func (s *Service) Recount(ctx context.Context) error {
	now := s.now()
	if err := s.countNodeTable(ctx, nil); err != nil {
		return err
	}
	live := s.beginSessionCount()
	err := s.store.View(ctx, func(tx store.Tx) error {
		live.reset()
		if err := tx.EachBindingSession(func(sess binding.BindingSession) error {
			live.session(sess, now)
			return nil
		}); err != nil {
			return err
		}
		return tx.EachBearerSession(func(h [32]byte, sess authn.BearerSession) error {
			live.bearer(h, sess, now)
			return nil
		})
	})
	live.end(err, now)
	if err != nil {
		return err
	}
	return s.recountRevocations(ctx, now)
}

// retirable reports whether a session may be deleted: it has been terminal for
// binding.MinTerminalRetention, and it is not the session that made its node's active
// binding, whose credentials a revocation must still be able to read (docs/protocol.md §10.5).
// Those are at most one per node key, and become retirable when the binding ends.
func retirable(tx store.Tx, sess binding.BindingSession, now time.Time) (bool, error) {
	if !sess.State.Terminal() || now.Before(sess.UpdatedAt.Add(binding.MinTerminalRetention)) {
		return false, nil
	}
	if sess.State != binding.Active {
		return true, nil
	}
	b, err := tx.Binding(sess.NodeKey)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return b.SessionID != sess.ID, nil
}

// sweepBatch is how many binding sessions one sweep transaction deletes.
const sweepBatch = 256

// counterWindow is the window of the counter stored under key, by its prefix.
func counterWindow(key string) time.Duration {
	switch {
	case strings.HasPrefix(key, "register/"):
		return limits.RegisterWindow
	case strings.HasPrefix(key, "initiate-addr/"), strings.HasPrefix(key, "initiate-key/"):
		return limits.InitiateWindow
	case strings.HasPrefix(key, limits.RevokeCounterPrefix):
		return limits.RevokeWindow
	case strings.HasPrefix(key, limits.RevokeHeldPrefix):
		return math.MaxInt64 // a holding, not a window: it goes when the holding does
	case strings.HasPrefix(key, "login-addr/"):
		return authn.ChallengeTTL
	case strings.HasPrefix(key, "login-fail-"):
		return limits.LoginWindow
	case strings.HasPrefix(key, answers.NetworkCounterPrefix):
		return limits.NetworkHistorySpan
	}
	return binding.ResolveWindow
}

// RepairAtStart returns every session found VERIFYING to PENDING_NODE_ACCEPTANCE: VERIFYING
// is held only inside one accept, so a session left in it was cut off by a stop. It also
// counts the open binding sessions and live bearer sessions for the global caps. Call it
// once, before serving.
func (s *Service) RepairAtStart(ctx context.Context) (int, error) {
	now := s.now()
	var stuck []string
	err := s.store.View(ctx, func(tx store.Tx) error {
		if err := tx.EachBindingSession(func(sess binding.BindingSession) error {
			if sess.State == binding.Verifying {
				stuck = append(stuck, sess.ID)
			}
			if !binding.ExpireIfDue(sess, now).State.Terminal() {
				s.tables.sessions.Add(sess.ID, sess.Origin, sess.UpdatedAt, sess.ExpiresAt)
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.EachBearerSession(func(h [32]byte, sess authn.BearerSession) error {
			if sess.Check(now) == nil {
				s.tables.bearers.Add(h, sess.Origin, sess.IssuedAt, sess.ExpiresAt)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, id := range stuck {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			sess, err := tx.BindingSession(id)
			if err != nil {
				return err
			}
			return tx.PutBindingSession(binding.RepairAtStart(sess, now))
		})
		if err != nil {
			return 0, err
		}
	}
	if len(stuck) > 0 {
		s.log.Warn("repaired binding sessions left VERIFYING by a stop", "count", len(stuck))
	}
	return len(stuck), nil
}
