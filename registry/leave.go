package registry

import (
	"context"
	"errors"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/store"
)

// Leaving and revoking (docs/protocol.md §10.4–10.6): logout ends one bearer session, a revocation
// signed by the root key ends a credential everywhere, and unbind lets either side of a
// binding leave it alone.

// Logout deletes the bearer session of an Authorization header (docs/protocol.md §10.4); its token
// then gets NO_SESSION everywhere. A missing, unknown or expired token fails as on every
// bearer endpoint and changes nothing.
func (s *Service) Logout(ctx context.Context, header string) (api.OKResult, error) {
	token, err := authn.ParseBearer(header)
	if err != nil {
		return api.OKResult{}, err
	}
	h := authn.HashToken(token)
	now := s.now()
	var op string
	err = s.store.Update(ctx, func(tx store.Tx) error {
		sess, err := tx.BearerSession(h)
		if errors.Is(err, store.ErrNotFound) {
			return proto.New(proto.NoSession, "no session for this bearer token; log in")
		}
		if err != nil {
			return err
		}
		if err := sess.Check(now); err != nil {
			return err
		}
		op = sess.OperatorDID
		return tx.DeleteBearerSession(h)
	})
	if err != nil {
		return api.OKResult{}, err
	}
	s.tables.bearers.Remove(h)
	s.log.Debug("operator logged out", "operator_did", op)
	return api.OKResult{OK: true}, nil
}

// Revoke records a credential revocation signed by the operator's root key (docs/protocol.md §10.5)
// and applies all its effects in one transaction: bearer sessions opened with a credential
// of that operator carrying that revocation_id are deleted, and the active bindings that such
// a device credential or authorization made end with unbound_by "revocation". From then on
// login and authorize with such a credential fail with DC_REVOKED or AUTHZ_REVOKED.
//
// The signature is verified before the transaction. A revocation of the same revocation_id
// by the same root key, under either spelling of its DID, is answered with its first
// revoked_at and changes nothing. A revocation pins nothing; it is DID_COLLISION when a login
// pinned its DID's body to another root key (docs/protocol.md §10.8), and a new one is
// admitted as [Service.admitRevocation] says.
func (s *Service) Revoke(ctx context.Context, r authn.SignedRevocation, addr string) (api.RevokeResult, error) {
	now := s.now()
	rv, err := authn.VerifyRevocation(r, s.prefix, now)
	if err != nil {
		return api.RevokeResult{}, err
	}
	did, err := didkey.Parse(rv.OperatorDID)
	if err != nil {
		return api.RevokeResult{}, proto.Errorf(proto.DCIDBinding, "revocation: %w", err)
	}
	var out api.RevokeResult
	var endedTokens [][32]byte
	err = s.store.Update(ctx, func(tx store.Tx) error {
		endedTokens = nil
		out = api.RevokeResult{OK: true, OperatorDID: rv.OperatorDID, RevocationID: rv.RevocationID, EndedBindings: []api.EndedBinding{}}
		pin, _, err := checkPin(tx, did, rv.RootKey)
		if err != nil {
			return err
		}
		old, found, err := revocationByRoot(tx, rv.RootKey, rv.RevocationID)
		if err != nil {
			return err
		}
		if found {
			out.RevokedAt, out.AlreadyRevoked = canonical.FormatTime(old.RevokedAt), true
			return nil
		}
		if err := slotFree(tx, rv); err != nil {
			return err
		}
		if err := s.admitRevocation(tx, pin, rv.RootKey, rv.RevocationID, addr, now); err != nil {
			return err
		}
		if err := tx.PutRevocation(store.Revocation{
			OperatorDID: rv.OperatorDID, RevocationID: rv.RevocationID, RevokedAt: rv.RevokedAt,
			RootPublicKey: r.Revocation.OperatorRootPublicKey, Signature: r.Signature, RecordedAt: now,
			Group: netblock.BlockOf(addr), Proven: pin.LoggedIn(),
		}); err != nil {
			return err
		}
		if out.LogIndex, err = s.logRevoke(tx, rv, r); err != nil {
			return err
		}
		out.RevokedAt = canonical.FormatTime(rv.RevokedAt)
		spellings, err := pinnedSpellings(tx, rv.RootKey)
		if err != nil {
			return err
		}
		for _, spelling := range spellings {
			under := rv
			under.OperatorDID = spelling
			ended, err := endSessions(tx, under)
			if err != nil {
				return err
			}
			endedTokens = append(endedTokens, ended...)
			bs, err := s.endBindings(tx, under, now)
			if err != nil {
				return err
			}
			out.EndedBindings = append(out.EndedBindings, bs...)
		}
		out.EndedSessions = len(endedTokens)
		return nil
	})
	if err != nil {
		return api.RevokeResult{}, err
	}
	for _, h := range endedTokens {
		s.tables.bearers.Remove(h)
	}
	s.log.Debug("credential revoked", "operator_did", out.OperatorDID, "revocation_id", out.RevocationID,
		"ended_sessions", out.EndedSessions, "ended_bindings", len(out.EndedBindings))
	return out, nil
}

// slotFree refuses, with DID_COLLISION, a revocation whose (operator DID, revocation_id)
// holds another root key's revocation: the list keeps one record per pair as signed, and
// that record still revokes the other key's credentials. The root key revokes under its
// 10-hex DID instead, which revokes its credentials of both spellings.
func slotFree(tx store.Tx, rv authn.Revoked) error {
	_, err := tx.Revocation(rv.OperatorDID, rv.RevocationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return authn.ErrDIDCollision
}

// endSessions deletes the bearer sessions opened with a revoked credential. A session stored
// before sessions recorded their credential's revocation_id cannot be told apart, so every
// such session of the operator ends too: a spare login is cheaper than a revoked device
// keeping its session.
func endSessions(tx store.Tx, rv authn.Revoked) ([][32]byte, error) {
	var ended [][32]byte
	err := eachBearerSession(tx, rv.OperatorDID, func(h [32]byte, sess authn.BearerSession) (bool, error) {
		if sess.RevocationID != rv.RevocationID && sess.RevocationID != "" {
			return false, nil
		}
		ended = append(ended, h)
		return false, tx.DeleteBearerSession(h)
	})
	if err != nil {
		return nil, err
	}
	return ended, nil
}

// eachBearerSession calls fn with each bearer session kept under the operator DID did, one
// read at a time, leaving out any deleted since the list was read, until fn says stop.
func eachBearerSession(tx store.Tx, did string, fn func(h [32]byte, sess authn.BearerSession) (stop bool, err error)) error {
	hashes, err := tx.BearerSessionsOf(did)
	if err != nil {
		return err
	}
	for _, h := range hashes {
		sess, err := tx.BearerSession(h)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if stop, err := fn(h, sess); stop || err != nil {
			return err
		}
	}
	return nil
}

// endBindings ends the operator's active bindings that the revoked pair made, as an unbind
// would, with unbound_by "revocation".
func (s *Service) endBindings(tx store.Tx, rv authn.Revoked, now time.Time) ([]api.EndedBinding, error) {
	bs, err := tx.BindingsByOperator(rv.OperatorDID)
	if err != nil {
		return nil, err
	}
	list := authn.RevocationSet{{OperatorDID: rv.OperatorDID, RevocationID: rv.RevocationID}: true}
	ended := []api.EndedBinding{}
	for _, b := range bs {
		sess, err := tx.BindingSession(b.SessionID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		found := err == nil
		if revoked, err := binding.BindingRevoked(b, sess, list); err != nil {
			return nil, err
		} else if !revoked {
			continue
		}
		if err := s.endBinding(tx, b, sess, found, binding.UnboundByRevocation, now); err != nil {
			return nil, err
		}
		ended = append(ended, api.EndedBinding{BindingSessionID: b.SessionID, NodeDID: b.NodeDID})
	}
	return ended, nil
}

// endBinding removes the active binding b, as an unbind would, and marks sess, the session
// that made it, unbound by by; found says whether that session is still there to mark.
func (s *Service) endBinding(tx store.Tx, b binding.Binding, sess binding.BindingSession, found bool, by binding.UnboundBy, now time.Time) error {
	if err := tx.DeleteBinding(b.NodeKey); err != nil {
		return err
	}
	if _, err := s.logUnbind(tx, b, by, now, nil); err != nil {
		return err
	}
	if !found {
		return nil
	}
	if next, err := binding.Unbind(sess, b, true, by, now); err == nil {
		return tx.PutBindingSession(next)
	}
	return nil
}

// UnbindByOperator ends the active binding that session id created, as the binding's
// operator (docs/protocol.md §10.6): unknown id → NOT_FOUND, another operator → PERMISSION_DENIED,
// a binding that is not the node's current one → BAD_STATE.
func (s *Service) UnbindByOperator(ctx context.Context, id string, op authn.Operator) (api.UnbindResult, error) {
	return s.unbind(ctx, id, binding.UnboundByOperator, nil, func(sess binding.BindingSession) error {
		if sess.OperatorDID == "" || sess.OperatorDID != op.DID {
			return proto.New(proto.PermissionDenied, "only the operator of this binding may unbind it")
		}
		return nil
	})
}

// UnbindByNode ends the active binding that session id created, with the node's signature
// over message 12 (docs/protocol.md §10.6). The signature is verified on a read of the session,
// before the write transaction, which checks the state again.
func (s *Service) UnbindByNode(ctx context.Context, id string, req api.NodeUnbindRequest) (api.UnbindResult, error) {
	sess, err := s.session(ctx, id)
	if err != nil {
		return api.UnbindResult{}, err
	}
	d, err := parseNodeDID(req.NodeDID)
	if err != nil {
		return api.UnbindResult{}, err
	}
	if !d.Matches(sess.NodeKey) {
		return api.UnbindResult{}, proto.New(proto.PermissionDenied, "node_did does not name this session's node")
	}
	msg := canonical.Unbind{BindingSessionID: id, NodeDID: req.NodeDID, TS: req.TS}
	if err := s.nodeChecker.CheckBound(sess.NodeKey, msg, req.Signature); err != nil {
		return api.UnbindResult{}, err
	}
	key := sess.NodeKey
	return s.unbind(ctx, id, binding.UnboundByNode, &req, func(cur binding.BindingSession) error {
		if cur.NodeKey != key {
			return proto.New(proto.PermissionDenied, "node_did does not name this session's node")
		}
		return nil
	})
}

// session reads one binding session (NOT_FOUND when unknown).
func (s *Service) session(ctx context.Context, id string) (binding.BindingSession, error) {
	var sess binding.BindingSession
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		sess, err = sessionOf(tx, id)
		return err
	})
	return sess, err
}

// unbind runs one unbind in a transaction: the session, the caller's check, then the state.
// byNode is the node's signed request, nil for the operator's.
func (s *Service) unbind(ctx context.Context, id string, by binding.UnboundBy, byNode *api.NodeUnbindRequest, allowed func(binding.BindingSession) error) (api.UnbindResult, error) {
	now := s.now()
	var out api.UnbindResult
	var nodeKey didkey.PublicKey
	err := s.store.Update(ctx, func(tx store.Tx) error {
		sess, err := sessionOf(tx, id)
		if err != nil {
			return err
		}
		if err := allowed(sess); err != nil {
			return err
		}
		cur, err := tx.Binding(sess.NodeKey)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		next, err := binding.Unbind(sess, cur, err == nil, by, now)
		if err != nil {
			return err
		}
		if err := tx.DeleteBinding(sess.NodeKey); err != nil {
			return err
		}
		nodeKey = sess.NodeKey
		out = api.UnbindResult{
			BindingSessionID: next.ID, State: next.State.String(), Bound: false,
			UnboundAt: canonical.FormatTime(next.UnboundAt), UnboundBy: string(next.UnboundBy),
		}
		if out.LogIndex, err = s.logUnbind(tx, cur, by, next.UnboundAt, byNode); err != nil {
			return err
		}
		return tx.PutBindingSession(next)
	})
	if err != nil {
		return api.UnbindResult{}, err
	}
	s.tables.nodes.Keep(nodeKey, false)
	s.log.Debug("binding ended", "binding_session_id", id, "node_key", nodeKey.Hex(), "unbound_by", out.UnboundBy)
	return out, nil
}
