package registry

import (
	"context"
	"strings"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

// Sweep makes durable what time has already decided: non-terminal binding sessions past
// expires_at become EXPIRED, and bearer sessions and counters whose windows are over are
// removed. Reads apply expiry on their own, so Sweep only keeps the store tidy; call it
// periodically (svrpd does, every minute).
func (s *Service) Sweep(ctx context.Context) error {
	now := s.now()
	var expired []binding.Session
	var deadTokens [][32]byte
	var deadCounters []string
	err := s.store.View(ctx, func(tx store.Tx) error {
		if err := tx.EachSession(func(sess binding.Session) error {
			if next := binding.ExpireIfDue(sess, now); next.State != sess.State {
				expired = append(expired, next)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := tx.EachOperatorSession(func(h [32]byte, sess authn.Session) error {
			if sess.Check(now) != nil {
				deadTokens = append(deadTokens, h)
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.EachCounter(func(key string, c binding.Counter) error {
			window := binding.ResolveWindow
			switch {
			case strings.HasPrefix(key, "register/"):
				window = registerWindow
			case strings.HasPrefix(key, revokeCounterPrefix):
				window = revokeWindow
			}
			if now.Sub(c.Start) >= window {
				deadCounters = append(deadCounters, key)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, sess := range expired {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			cur, err := tx.Session(sess.ID)
			if err != nil {
				return err
			}
			if next := binding.ExpireIfDue(cur, now); next.State != cur.State {
				return tx.PutSession(next)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		for _, h := range deadTokens {
			if err := tx.DeleteOperatorSession(h); err != nil {
				return err
			}
		}
		for _, k := range deadCounters {
			if err := tx.DeleteCounter(k); err != nil {
				return err
			}
		}
		return nil
	})
	if n := len(expired) + len(deadTokens) + len(deadCounters); n > 0 && err == nil {
		s.log.Debug("sweep", "expired_sessions", len(expired), "ended_bearer_sessions", len(deadTokens), "ended_counters", len(deadCounters))
	}
	return err
}

// RepairAtStart returns every session found VERIFYING to PENDING_NODE_ACCEPTANCE: VERIFYING
// is held only inside one accept, so a session left in it was cut off by a stop. Call it
// once, before serving.
func (s *Service) RepairAtStart(ctx context.Context) (int, error) {
	now := s.now()
	var stuck []string
	err := s.store.View(ctx, func(tx store.Tx) error {
		return tx.EachSession(func(sess binding.Session) error {
			if sess.State == binding.Verifying {
				stuck = append(stuck, sess.ID)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	for _, id := range stuck {
		err := s.store.Update(ctx, func(tx store.Tx) error {
			sess, err := tx.Session(id)
			if err != nil {
				return err
			}
			return tx.PutSession(binding.RepairAtStart(sess, now))
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
