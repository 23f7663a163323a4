package registry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/admission"
	"github.com/svrp/svrp/store"
)

// The registry's capped tables (package registry/limits, docs/protocol.md §8.1), each an admission.Table
// held in memory beside the store: node records, live bearer sessions and open binding
// sessions. Each entry carries the client group it came from (its Origin, stored with it), so
// a count from the store — at the first registration or start, and at every sweep — finds
// every entry's groups again; on a store shared by several daemons that count is how each
// learns the others' entries, and no counter per group is written.
type tables struct {
	nodes    *admission.Table[didkey.PublicKey]
	bearers  *admission.Table[[32]byte]
	sessions *admission.Table[string]

	// nodesLoaded says the node table was counted from the store; the first registration
	// counts it, so a registry that only serves reads never does.
	nodesMu     sync.Mutex
	nodesLoaded bool

	kinds []limits.Table // the tables' bounds, as in Limits.Tables
	warn  [3]rareWarning // per table, as kinds
}

func newTables(l limits.Limits) tables {
	t := l.Tables()
	return tables{
		nodes:    admission.New[didkey.PublicKey](t[0].Name, t[0].Quota, DefaultOnlineWindow),
		bearers:  admission.New[[32]byte](t[1].Name, t[1].Quota, limits.BearerIdle),
		sessions: admission.New[string](t[2].Name, t[2].Quota, 0),
		kinds:    t,
	}
}

// refused is the RATE_LIMITED answer to a newcomer that table i (of Limits.Tables) refused
// with err, an *admission.Refusal; a full table is also logged, once a minute at most.
func (s *Service) refused(i int, err error) error {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return err
	}
	t := s.tables.kinds[i]
	limit := t.Refusals[r.Level]
	if r.Full {
		limit = t.Refusals[len(t.Refusals)-1]
		s.capReached(&s.tables.warn[i], t.Name, t.Quota.Cap)
	}
	return budget.RetryLater(limit, r.Error()+"; try again later", r.RetryAfter)
}

// loadNodes counts the node table from the store once.
func (s *Service) loadNodes(ctx context.Context) error {
	s.tables.nodesMu.Lock()
	defer s.tables.nodesMu.Unlock()
	if s.tables.nodesLoaded {
		return nil
	}
	if err := s.countNodeTable(ctx, nil); err != nil {
		return err
	}
	s.tables.nodesLoaded = true
	return nil
}

// countNodeTable counts the node table from the store, one pass over its records, showing
// each record to also, when not nil.
func (s *Service) countNodeTable(ctx context.Context, also func(*store.Node)) error {
	t := s.tables.nodes
	t.BeginCount()
	err := s.store.ScanNodes(ctx, func(n *store.Node) error {
		t.Counted(n.Key, n.Origin, n.LastSeen, time.Time{})
		if also != nil {
			also(n)
		}
		return nil
	})
	t.EndCount(err == nil, s.now())
	return err
}

// nodeRoom refuses, before a registration's signature is verified, a key the node table has
// no place for: one it does not hold, whose client, block or network or the table itself is
// full of records in use, and that the store does not hold either (another daemon's since the
// last count). So a refused newcomer costs no verification.
func (s *Service) nodeRoom(ctx context.Context, key didkey.PublicKey, addr string, now time.Time) error {
	if s.tables.nodes.Has(key, now) {
		return nil
	}
	refusal := s.tables.nodes.Room(addr, now)
	if refusal == nil {
		return nil
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		_, err := tx.Node(key)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return s.refused(0, refusal)
	}
	return err
}

// placeNode makes room, within a registration's transaction, for the new key r holds a
// place for: when the place has to come from a stale record, it finds one (placeVictim),
// deletes it and returns it.
func (s *Service) placeNode(tx store.Tx, r *admission.Reservation[didkey.PublicKey], now time.Time) (*store.Node, error) {
	if !r.NeedsVictim() {
		return nil, nil
	}
	stale := func(k didkey.PublicKey) (n store.Node, gone, ok bool, err error) {
		n, err = tx.Node(k)
		if errors.Is(err, store.ErrNotFound) {
			return n, true, true, nil
		}
		if err != nil {
			return n, false, false, err
		}
		if now.Sub(n.LastSeen) < DefaultOnlineWindow {
			r.Pass(k, n.LastSeen, false)
			return n, false, false, nil
		}
		if _, err := tx.Binding(k); err == nil {
			r.Pass(k, n.LastSeen, true)
			return n, false, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return n, false, false, err
		}
		return n, false, true, nil
	}
	// A transaction that runs again checks the victim it took before.
	if k, ok := r.Victim(); ok {
		if n, gone, ok, err := stale(k); err != nil || ok {
			return deleted(tx, n, gone, err)
		}
	}
	for range limits.MaxVictimChecks {
		k, ok := r.Next()
		if !ok {
			return nil, s.refused(0, r.Refusal())
		}
		n, gone, ok, err := stale(k)
		if err != nil {
			return nil, err
		}
		if ok {
			r.Take(k)
			return deleted(tx, n, gone, nil)
		}
	}
	return nil, budget.RetryLater(budget.LimitNodes, "the registry is finding room for new nodes; try again in a second", time.Second)
}

// deleted deletes n, a stale record found by placeNode, unless it is gone already.
func deleted(tx store.Tx, n store.Node, gone bool, err error) (*store.Node, error) {
	if err != nil || gone {
		return nil, err
	}
	if err := tx.DeleteNode(n.Key); err != nil {
		return nil, err
	}
	return &n, nil
}

// reserveBearer takes a place for the session of a login of operatorDID from addr. When the
// place has to come from another session — an idle one, or else one of the operator's own,
// which only its devices can have spent — that session's hash is returned for the login's
// transaction to delete (holdBearer). The caller settles the reservation.
func (s *Service) reserveBearer(ctx context.Context, addr, operatorDID string, now time.Time) (*admission.Reservation[[32]byte], *[32]byte, error) {
	r := s.tables.bearers.Reserve(addr, now)
	if !r.NeedsVictim() {
		return r, nil, nil
	}
	// A session's use is known to this table (Use), so the first candidate is idle.
	if h, ok := r.Next(); ok {
		r.Take(h)
		return r, &h, nil
	}
	mine, err := s.bearersOf(ctx, operatorDID)
	if err != nil {
		r.Cancel()
		return nil, nil, err
	}
	if h, ok := r.Own(mine); ok {
		return r, &h, nil
	}
	r.Cancel()
	return nil, nil, s.refused(1, r.Refusal())
}

// bearersOf reads the hashes of operatorDID's sessions.
func (s *Service) bearersOf(ctx context.Context, operatorDID string) (mine [][32]byte, err error) {
	err = s.store.View(ctx, func(tx store.Tx) error {
		mine, err = tx.BearerSessionsOf(operatorDID)
		return err
	})
	return mine, err
}

// bearerRoom checks, before a login's signatures are verified, that a session from addr
// would find a place: an idle one, or one of the sessions the operator the login names
// holds already (which reserveBearer checks again once the login is verified).
func (s *Service) bearerRoom(ctx context.Context, addr, operatorDID string, now time.Time) error {
	err := s.tables.bearers.Room(addr, now)
	if err == nil {
		return nil
	}
	if mine, rerr := s.bearersOf(ctx, operatorDID); rerr != nil || len(mine) > 0 {
		return rerr
	}
	return s.refused(1, err)
}

// holdBearer applies, in a login's transaction, the quota of the operator, and ends the
// session the login displaced, if any. An operator at its quota keeps logging in: its oldest
// session ends (a session past its expiry that the sweep has not yet deleted is among the
// oldest), since only its own devices can have spent the quota and refusing it would lock out
// an operator whose clients log in without logging out.
func (s *Service) holdBearer(tx store.Tx, operatorDID string, displaced *[32]byte) error {
	mine, err := tx.BearerSessionsOf(operatorDID)
	if err != nil {
		return err
	}
	if len(mine) >= s.limits.MaxBearerSessionsPerOperator {
		oldest, err := s.oldestBearer(tx, mine)
		if err != nil {
			return err
		}
		if err := tx.DeleteBearerSession(oldest); err != nil {
			return err
		}
		s.tables.bearers.Remove(oldest)
	}
	if displaced == nil {
		return nil
	}
	return tx.DeleteBearerSession(*displaced)
}

// oldestBearer returns the one of hashes whose session was issued first: the one that ends
// first, since every session lasts authn.SessionTTL. The ends come from the bearer table,
// which holds every session it counted from the store or reserved since; only a session it
// does not hold (another daemon's, since the last count) is read, so an operator at its quota
// logs in without its sessions being read one by one.
func (s *Service) oldestBearer(tx store.Tx, hashes [][32]byte) ([32]byte, error) {
	var oldest [32]byte
	var first time.Time
	found := false
	for _, h := range hashes {
		end, ok := s.tables.bearers.End(h)
		if !ok {
			sess, err := tx.BearerSession(h)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return oldest, err
			}
			end = sess.ExpiresAt
		}
		if !found || end.Before(first) {
			oldest, first, found = h, end, true
		}
	}
	return oldest, nil
}

// reserveOpenSession takes a place for a binding session initiated from addr. Every open
// session is in use, so a full table or group refuses.
func (s *Service) reserveOpenSession(addr string, now time.Time) (*admission.Reservation[string], error) {
	r := s.tables.sessions.Reserve(addr, now)
	if r.NeedsVictim() {
		r.Cancel()
		return nil, s.refused(2, r.Refusal())
	}
	return r, nil
}

// sessionCount is one read of the store's open binding sessions and live bearer sessions
// into the two session tables.
type sessionCount struct{ s *Service }

func (s *Service) beginSessionCount() sessionCount {
	s.tables.sessions.BeginCount()
	s.tables.bearers.BeginCount()
	return sessionCount{s}
}

func (c sessionCount) session(sess binding.BindingSession, now time.Time) {
	if !binding.ExpireIfDue(sess, now).State.Terminal() {
		c.s.tables.sessions.Counted(sess.ID, sess.Origin, sess.UpdatedAt, sess.ExpiresAt)
	}
}

func (c sessionCount) bearer(h [32]byte, sess authn.BearerSession, now time.Time) {
	if sess.Check(now) == nil {
		c.s.tables.bearers.Counted(h, sess.Origin, sess.IssuedAt, sess.ExpiresAt)
	}
}

// reset is for a transaction that runs again: what it reads again is counted again.
func (c sessionCount) reset() {}

// end ends the count: complete when the read succeeded.
func (c sessionCount) end(err error, now time.Time) {
	c.s.tables.sessions.EndCount(err == nil, now)
	c.s.tables.bearers.EndCount(err == nil, now)
}

// rareWarning logs one warning per limits.CapWarnEvery at most.
type rareWarning struct {
	mu   sync.Mutex
	last time.Time
}

func (r *rareWarning) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.Sub(r.last) < limits.CapWarnEvery {
		return false
	}
	r.last = now
	return true
}

// capReached logs, at most once a minute per cap, that a global cap refused a request.
func (s *Service) capReached(w *rareWarning, what string, limit int) {
	if w.due(s.clock()) {
		s.log.Warn("global cap reached; refusing with RATE_LIMITED", "cap", what, "limit", limit)
	}
}
