package registry

import (
	"context"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/store"
)

// Census is a count of the registry's state at one moment, for a daemon's gauges.
type Census struct {
	// Nodes is the number of node records; Online those seen within DefaultOnlineWindow.
	Nodes, Online int
	// OpenSessions counts the binding sessions not in a terminal state, by state, with
	// expiry applied as on every read. Every non-terminal state is present.
	OpenSessions map[string]int
	// BearerSessions counts the operator sessions that have not expired.
	BearerSessions int
	// ChallengesUsed is the size of the login challenges' used-set, and ChallengeCapacity
	// its bound; both are -1 when the Challenges implementation does not tell.
	ChallengesUsed, ChallengeCapacity int
}

// Census counts the registry's state. It reads every node record and every session, so it
// is for a scrape every few seconds, not for each request.
func (s *Service) Census(ctx context.Context) (Census, error) {
	now := s.now()
	c := Census{OpenSessions: map[string]int{}, ChallengesUsed: -1, ChallengeCapacity: -1}
	for _, st := range []binding.State{binding.Initiated, binding.PendingOperator, binding.PendingNodeAcceptance} {
		c.OpenSessions[st.String()] = 0
	}
	count := func(n *store.Node) error {
		c.Nodes++
		if now.Sub(n.LastSeen) <= DefaultOnlineWindow {
			c.Online++
		}
		return nil
	}
	err := s.store.ScanNodes(ctx, count)
	if err != nil {
		return Census{}, err
	}
	err = s.store.View(ctx, func(tx store.Tx) error {
		err := tx.EachBindingSession(func(sess binding.BindingSession) error {
			if st := binding.ExpireIfDue(sess, now).State; !st.Terminal() {
				c.OpenSessions[st.String()]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		return tx.EachBearerSession(func(_ [32]byte, sess authn.BearerSession) error {
			if sess.Check(now) == nil {
				c.BearerSessions++
			}
			return nil
		})
	})
	if err != nil {
		return Census{}, err
	}
	if ch, ok := s.challenges.(interface {
		Used() int
		Capacity() int
	}); ok {
		c.ChallengesUsed, c.ChallengeCapacity = ch.Used(), ch.Capacity()
	}
	return c, nil
}
