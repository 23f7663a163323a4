package registry

import (
	"encoding/hex"
	"errors"
	"time"

	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/store"
)

// The quotas of the two session tables (limits.go): what one address block may hold of each,
// and what a full table does for a newcomer. Both tables are held in memory (expirySet) with
// the block each session came from; the block is stored with the session, so a count from
// the store (a start, a sweep, a recount on a shared store) finds it again.

func (s *Service) bearerQuota() quota {
	return quota{limit: s.limits.MaxBearerSessions, perGroup: s.limits.MaxBearerSessionsPerBlock}
}

func (s *Service) openSessionQuota() quota {
	return quota{limit: s.limits.MaxOpenBindingSessions, perGroup: s.limits.MaxOpenBindingSessionsPerBlock}
}

// bearerRefusal is the refusal of a login for want of a place (why from expirySet.room), or
// nil when there is one.
func (s *Service) bearerRefusal(why int) error {
	switch why {
	case placeGroup:
		return rateLimited(LimitBearerSessionsPerBlock, "this address block holds too many sessions; log out of one or wait")
	case placeTooFull:
		s.capReached(&s.warnBearers, "bearer sessions", s.limits.MaxBearerSessions)
		return rateLimited(LimitBearerSessions, "the registry holds too many sessions; try again later")
	}
	return nil
}

// bearerRoom checks, before a login's signatures are verified, that a session from addr
// would find a place.
func (s *Service) bearerRoom(addr string, now time.Time) error {
	return s.bearerRefusal(s.bearers.hasRoom(netblock.BlockOf(addr), s.bearerQuota(), now))
}

// reserveBearer takes a place for the session of token hash id from addr, and returns the
// session it displaces ("" for none), which the login's transaction ends (holdBearer). A
// login that then fails leaves the displaced session in the store, uncounted in memory
// until the next count from the store, so until then the cap may be passed by one session
// per such login.
func (s *Service) reserveBearer(id string, end time.Time, addr string, now time.Time) (string, error) {
	displaced, why := s.bearers.reserve(id, end, netblock.BlockOf(addr), s.bearerQuota(), now)
	return displaced, s.bearerRefusal(why)
}

// holdBearer applies, in a login's transaction, the quota of the operator, and ends the
// session the login displaced. An operator at its quota keeps logging in: its oldest session
// ends (a session past its expiry that the sweep has not yet deleted is among the oldest),
// since only its own devices can have spent the quota and refusing it would lock out an
// operator whose clients log in without logging out.
func (s *Service) holdBearer(tx store.Tx, operatorDID, displaced string) error {
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
		s.bearers.remove(hex.EncodeToString(oldest[:]))
	}
	if displaced == "" {
		return nil
	}
	var h [32]byte
	if _, err := hex.Decode(h[:], []byte(displaced)); err != nil {
		return nil // every id of the set is a hex token hash
	}
	return tx.DeleteBearerSession(h)
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
		end, ok := s.bearers.end(hex.EncodeToString(h[:]))
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

// reserveOpenSession takes a place for the binding session id initiated from addr, and
// returns the open session it displaces ("" for none), which the initiate's transaction
// deletes.
func (s *Service) reserveOpenSession(id string, end time.Time, addr string, now time.Time) (string, error) {
	displaced, why := s.openSessions.reserve(id, end, netblock.BlockOf(addr), s.openSessionQuota(), now)
	switch why {
	case placeGroup:
		return "", rateLimited(LimitOpenSessionsPerBlock, "this address block holds too many open binding sessions; cancel one or let it expire")
	case placeTooFull:
		s.capReached(&s.warnSessions, "open binding sessions", s.limits.MaxOpenBindingSessions)
		return "", rateLimited(LimitOpenSessions, "the registry holds too many open binding sessions; try again later")
	}
	return displaced, nil
}
