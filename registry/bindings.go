package registry

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/store"
)

// errCodeNotFound is the one answer to every failed resolve: invalid, expired and used codes
// must be indistinguishable, down to the bytes (description 7, rule 1).
var errCodeNotFound = proto.New(proto.NotFound, "binding code not found")

func errSessionNotFound() error {
	return proto.New(proto.NotFound, "no binding session with this id")
}

// Initiate opens a binding session from a node's signed description (docs/protocol.md §5.4). addr is
// the client address (package registry/limits): its initiates are counted per limits.InitiateWindow.
func (s *Service) Initiate(ctx context.Context, req binding.InitiateRequest, addr string) (api.InitiateResult, error) {
	now := s.now()
	key, err := binding.CheckInitiate(req, now)
	if err != nil {
		return api.InitiateResult{}, err
	}
	budgets := initiateKeys{addr: "initiate-addr/" + addr, block: "initiate-addr/" + netblock.BlockOf(addr), key: "initiate-key/" + key.Hex()}
	if err := s.initiateBudgets(ctx, budgets, now); err != nil {
		return api.InitiateResult{}, err
	}
	// A full table or group refuses before the signature is verified, at no cost of one.
	if err := s.tables.sessions.Room(addr, now); err != nil {
		return api.InitiateResult{}, s.refused(2, err)
	}
	if err := binding.VerifyInitiateSignature(req, key, s.prefix); err != nil {
		return api.InitiateResult{}, err
	}
	code, err := binding.NewShortCode(s.rand)
	if err != nil {
		return api.InitiateResult{}, err
	}
	token, err := binding.NewBindingToken(s.rand)
	if err != nil {
		return api.InitiateResult{}, err
	}
	sess := binding.NewBindingSession(req, key, binding.HashSecret(code), binding.HashSecret(token), now)
	sess.Origin = addr
	// The table is held in memory: a place is taken before the write and given back if the
	// write does not happen, so concurrent initiates cannot overshoot it.
	place, err := s.reserveOpenSession(addr, now)
	if err != nil {
		return api.InitiateResult{}, err
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if used, err := tx.BindingSessionIDUsed(req.BindingSessionID); err != nil {
			return err
		} else if used {
			return proto.New(proto.SessionExists, "this binding_session_id was already used")
		}
		c, err := tx.Counters(budgets.addr, budgets.key, budgets.block)
		if err != nil {
			return err
		}
		if err := s.initiateAllowed(c, now); err != nil {
			return err
		}
		// The index holds only sessions not stored as terminal, at most
		// MaxOpenSessionsPerNode of them plus those expired since the key's last initiate,
		// which are stored as EXPIRED here and so leave it: the key's history is never read.
		mine, err := tx.OpenBindingSessionsByNode(key)
		if err != nil {
			return err
		}
		open := 0
		for _, m := range mine {
			next := binding.ExpireIfDue(m, now)
			if !next.State.Terminal() {
				open++
				continue
			}
			if err := tx.PutBindingSession(next); err != nil {
				return err
			}
		}
		if open >= binding.MaxOpenSessionsPerNode {
			return budget.RateLimited(budget.LimitOpenSessionsPerNode, "this node has too many open binding sessions; cancel one or let it expire")
		}
		if err := tx.PutCounter(budgets.addr, c[0].Fail(now, limits.InitiateWindow)); err != nil {
			return err
		}
		if err := tx.PutCounter(budgets.key, c[1].Fail(now, limits.InitiateWindow)); err != nil {
			return err
		}
		if err := tx.PutCounter(budgets.block, c[2].Fail(now, limits.InitiateWindow)); err != nil {
			return err
		}
		return tx.PutBindingSession(sess)
	})
	if err != nil {
		place.Cancel()
		return api.InitiateResult{}, err
	}
	place.Commit(sess.ID, now, sess.ExpiresAt)
	s.log.Debug("binding initiated", "binding_session_id", sess.ID, "node_did", req.NodeDID)
	return api.InitiateResult{
		BindingSessionID: sess.ID, ShortCode: code, BindingToken: token,
		ExpiresAt: canonical.FormatTime(sess.ExpiresAt), State: sess.State.String(),
	}, nil
}

// initiateKeys names the counters of an initiate's budgets: its client address's, its
// address block's and its node key's.
type initiateKeys struct{ addr, block, key string }

// initiateBudgets refuses an initiate over a budget before its signature is verified; the
// write transaction checks them again (initiateAllowed) and counts the initiate.
func (s *Service) initiateBudgets(ctx context.Context, b initiateKeys, now time.Time) error {
	c, err := s.readCounters(ctx, b.addr, b.key, b.block)
	if err != nil {
		return err
	}
	return s.initiateAllowed(c, now)
}

// initiateAllowed checks the counters of initiateKeys' addr, key and block, in that order.
func (s *Service) initiateAllowed(c []store.Counter, now time.Time) error {
	switch {
	case c[0].Blocked(now, s.limits.InitiateAddressLimit, limits.InitiateWindow):
		return budget.RateLimited(budget.LimitInitiatePerAddress, "too many binding initiates from this address; wait and try again")
	case c[2].Blocked(now, budget.BlockLimit(s.limits.InitiateAddressLimit, s.limits.AddressBlockFactor), limits.InitiateWindow):
		return budget.RateLimited(budget.LimitInitiatePerBlock, "too many binding initiates from this address block; wait and try again")
	case c[1].Blocked(now, s.limits.InitiateKeyLimit, limits.InitiateWindow):
		return budget.RateLimited(budget.LimitInitiatePerKey, "too many binding initiates for this node key; wait and try again")
	}
	return nil
}

// Resolve moves the session a code names from INITIATED to PENDING_OPERATOR and shows it to
// the operator. Every failure is the same NOT_FOUND; failures are counted per code, per client
// address and per operator, and over any limit the answer is RATE_LIMITED. A resolve naming
// its node (docs/protocol.md §10.9) finds only a session of that node, and its failures are
// counted per node instead of against the global budget.
func (s *Service) Resolve(ctx context.Context, op authn.Operator, req api.ResolveRequest, addr string) (api.ResolveView, error) {
	var named didkey.DID
	node := ""
	if req.NodeDID != "" {
		d, err := parseNodeDID(req.NodeDID)
		if err != nil {
			return api.ResolveView{}, err
		}
		named, node = d, budget.NodeKey(d)
	}
	presented := binding.NormalizeCode(req.ShortCode)
	if req.ShortCode == "" {
		presented = req.BindingToken
	}
	// Look up by hash, never by string, so the time a failure takes says nothing about
	// whether the code ever existed.
	h := binding.HashSecret(presented)
	budgets := resolveBudgets(hex.EncodeToString(h[:]), addr, op.DID, s.limits, node == "")
	codeKey := budgets[0].key
	now := s.now()
	var view api.ResolveView
	var outcome error
	failed := false
	err := s.store.Update(ctx, func(tx store.Tx) error {
		outcome, failed = nil, false
		counters := make([]store.Counter, len(budgets))
		blocked := ""
		for i, b := range budgets {
			c, err := tx.Counter(b.key)
			if err != nil {
				return err
			}
			counters[i] = c
			if blocked == "" && c.Blocked(now, b.limit, binding.ResolveWindow) {
				blocked = b.name
			}
		}
		if blocked == "" && node != "" && s.resolveNodes.Refuses(node, addr, now) {
			blocked = budget.LimitResolvePerNode
		}
		if blocked != "" {
			outcome = budget.RateLimited(blocked, "too many failed resolves; wait and try again")
			return nil
		}
		sess, found, err := s.sessionBySecret(tx, h, now)
		if err != nil {
			return err
		}
		// A session of another node is not found, down to the work done: the session was
		// read either way, the key is compared whether one was found or not, and the
		// failure is counted the same.
		mine := node == "" || named.Matches(sess.NodeKey)
		found = found && mine
		var next binding.BindingSession
		if found {
			next, err = binding.Apply(sess, binding.Resolve, now)
		}
		if !found || err != nil {
			outcome, failed = errCodeNotFound, true
			for i, b := range budgets {
				if err := tx.PutCounter(b.key, counters[i].Fail(now, binding.ResolveWindow)); err != nil {
					return err
				}
			}
			return nil
		}
		next.OperatorDID = op.DID
		view = resolveView(next)
		if err := tx.DeleteCounter(codeKey); err != nil {
			return err
		}
		return tx.PutBindingSession(next)
	})
	if err == nil {
		// Counted once the failure is stored, so a transaction run again counts it once.
		if failed && node != "" {
			s.resolveNodes.Fail(node, addr, now)
		}
		err = outcome
	}
	if err != nil {
		return api.ResolveView{}, err
	}
	s.log.Debug("binding resolved", "binding_session_id", view.BindingSessionID, "operator_did", op.DID)
	return view, nil
}

// resolveBudget is one store counter of failed resolves and the limit it refuses from.
type resolveBudget struct {
	key   string
	limit int
	name  string // the limit's name in a refusal (budget.LimitResolvePerCode, ...)
}

// resolveBudgets lists the store counters a resolve's failure counts against, the code's
// first: per code, per client address and per operator (package registry/limits), so that a guesser gains
// nothing from many addresses or many sessions; and, when the resolve does not name its node,
// over all clients. A resolve naming its node is budgeted per node instead (budget.NodeFailures),
// so that strangers spending the global budget cannot refuse it.
func resolveBudgets(codeHash, addr, operator string, l limits.Limits, global bool) []resolveBudget {
	b := []resolveBudget{
		{"resolve-code/" + codeHash, binding.ResolveFailureLimit, budget.LimitResolvePerCode},
		{"resolve-addr/" + addr, l.ResolveAddressLimit, budget.LimitResolvePerAddress},
		{"resolve-addr/" + netblock.BlockOf(addr), budget.BlockLimit(l.ResolveAddressLimit, l.AddressBlockFactor), budget.LimitResolvePerBlock},
		{"resolve-op/" + operator, l.ResolveOperatorLimit, budget.LimitResolvePerOperator},
	}
	if global {
		b = append(b, resolveBudget{"resolve-all", l.ResolveGlobalLimit, budget.LimitResolveGlobal})
	}
	return b
}

func (s *Service) sessionBySecret(tx store.Tx, h [32]byte, now time.Time) (binding.BindingSession, bool, error) {
	id, err := tx.BindingSessionIDBySecret(h)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return binding.BindingSession{}, false, err
	}
	// A secret that was never issued still costs a session read, of an id no session can
	// have (ids are never empty), so the store does the same work for a code that never
	// existed as for one that was used or expired.
	sess, err := tx.BindingSession(id)
	if errors.Is(err, store.ErrNotFound) {
		return binding.BindingSession{}, false, nil
	}
	return binding.ExpireIfDue(sess, now), err == nil, err
}

func resolveView(s binding.BindingSession) api.ResolveView {
	r := s.Request
	return api.ResolveView{
		BindingSessionID: s.ID, State: s.State.String(), NodeDID: r.NodeDID,
		NodePublicKey: s.NodeKey.Base58(), NodePublicKeyFingerprint: s.NodeKey.Fingerprint(),
		DeviceSummary: optional(r.DeviceSummary), OS: optional(r.OS), Region: optional(r.Region),
		Requested: api.Requested{TaskTypes: nonNil(r.RequestedTaskTypes), SingleLimit: r.RequestedSingleLimit, DailyLimit: r.RequestedDailyLimit},
		Nonce:     r.Nonce, ExpiresAt: canonical.FormatTime(s.ExpiresAt),
		CreatedAt: r.CreatedAt, NodeSignature: s.NodeSignature,
	}
}

// Authorize records an operator's signed grant (docs/protocol.md §5.4): PENDING_OPERATOR →
// PENDING_NODE_ACCEPTANCE. The device credential's operator DID must not be pinned to another
// root key (DID_COLLISION, §10.8); authorize asks the pin and never writes one.
func (s *Service) Authorize(ctx context.Context, op authn.Operator, req api.AuthorizeRequest) (api.StateResult, error) {
	now := s.now()
	dc, az := req.DeviceCredential, req.AuthorizationCredential
	var revoked revocationsRead
	var pin authn.PinSet
	return s.transition(ctx, req.BindingSessionID, now, sessionChange{
		read: func(tx store.Tx, _ binding.BindingSession) (err error) {
			if revoked, err = readRevocations(tx, dc, [2]string{dc.OperatorDID, dc.RevocationID}, [2]string{az.OperatorDID, az.RevocationID}); err != nil {
				return err
			}
			pin, err = readPin(tx, dc.OperatorDID)
			return err
		},
		verify: func(sess binding.BindingSession) (binding.BindingSession, error) {
			next, err := binding.Apply(sess, binding.Authorize, now)
			if err != nil {
				return sess, err
			}
			if sess.OperatorDID != op.DID || dc.OperatorDID != op.DID {
				return sess, proto.New(proto.PermissionDenied, "only the operator that resolved this session may authorize it, with its own credential")
			}
			if err := binding.VerifyAuthorization(sess, dc, az, s.prefix, now, pin, revoked); err != nil {
				return sess, err
			}
			next.DeviceCredential, next.Authorization = &dc, &az
			return next, nil
		},
		// A pin or a revocation recorded since the read still stops the authorization.
		write: func(tx store.Tx, _ binding.BindingSession) error {
			if err := recheckPin(tx, pin, dc); err != nil {
				return err
			}
			return binding.CheckRevoked(dc, az, revocations(tx, dc))
		},
	})
}

// transition runs one state change of an existing session (see sessionChange): not found →
// NOT_FOUND, expiry applied first, and nothing written unless the change succeeds.
func (s *Service) transition(ctx context.Context, id string, now time.Time, c sessionChange) (api.StateResult, error) {
	next, err := s.changeSession(ctx, id, now, c)
	if err != nil {
		return api.StateResult{}, err
	}
	if next.State.Terminal() {
		s.tables.sessions.Remove(next.ID)
	}
	s.log.Debug("binding moved", "binding_session_id", next.ID, "state", next.State.String())
	return api.StateResult{BindingSessionID: next.ID, State: next.State.String()}, nil
}

// byResolvingOperator is a change that only the operator that resolved the session may make,
// with no signature to verify.
func byResolvingOperator(op authn.Operator, ev binding.Event, now time.Time, refusal string) sessionChange {
	return sessionChange{verify: func(sess binding.BindingSession) (binding.BindingSession, error) {
		if sess.OperatorDID == "" || sess.OperatorDID != op.DID {
			return sess, proto.New(proto.PermissionDenied, refusal)
		}
		return binding.Apply(sess, ev, now)
	}}
}

// SessionStatus reports a session's state; expiry is applied on read.
func (s *Service) SessionStatus(ctx context.Context, id string) (api.Status, error) {
	var sess binding.BindingSession
	var cur binding.Binding
	var found bool
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		if sess, err = tx.BindingSession(id); err != nil || sess.State != binding.Active {
			return err
		}
		cur, err = tx.Binding(sess.NodeKey)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.Status{}, errSessionNotFound()
	}
	if err != nil {
		return api.Status{}, err
	}
	sess = binding.ExpireIfDue(sess, s.now())
	st := api.Status{
		BindingSessionID: sess.ID, State: sess.State.String(), NodeDID: sess.Request.NodeDID,
		OperatorDID: optional(sess.OperatorDID), ExpiresAt: canonical.FormatTime(sess.ExpiresAt),
	}
	if sess.State == binding.Active {
		bound := binding.Bound(sess, cur, found)
		st.Bound = &bound
		switch {
		case bound:
		case sess.UnboundBy != "":
			at, by := canonical.FormatTime(sess.UnboundAt), string(sess.UnboundBy)
			st.UnboundAt, st.UnboundBy = &at, &by
		default:
			// Superseded before sessions recorded it: the newer binding's activation is
			// when this one ended, if that binding is still in place.
			by := string(binding.UnboundBySuperseded)
			st.UnboundBy = &by
			if found {
				at := canonical.FormatTime(cur.ActivatedAt)
				st.UnboundAt = &at
			}
		}
	}
	return st, nil
}

// Two actions on a binding session have two forms each (docs/protocol.md §5.4 cancel, §10.6
// unbind): the node's, signed over its own message, and the operator's, carried by its
// bearer token alone. A request with an Authorization header is the operator's and its body
// is ignored; one without is the node's. The HTTP layer hands both parts over as received, and
// CancelBy and UnbindBy pick the form.

// CancelBy cancels session id in the form the request takes: bearer is its Authorization
// header, body its body.
func (s *Service) CancelBy(ctx context.Context, id, bearer string, body []byte) (api.StateResult, error) {
	return eitherForm(ctx, s, id, bearer, body, s.CancelByOperator, api.DecodeNodeCancel, s.CancelByNode)
}

// UnbindBy ends the binding session id created, in the form the request takes.
func (s *Service) UnbindBy(ctx context.Context, id, bearer string, body []byte) (api.UnbindResult, error) {
	return eitherForm(ctx, s, id, bearer, body, s.UnbindByOperator, api.DecodeNodeUnbind, s.UnbindByNode)
}

// eitherForm runs the operator's form of an action when a bearer came with the request, and
// the node's, decoded from body, when none did. An unknown id is NOT_FOUND before either
// form is looked at (docs/protocol.md §5.4, §10.6); a request with neither a bearer nor a
// body proves nothing, and is NO_SESSION, so that a client that forgot to log in is told so.
func eitherForm[T, R any](ctx context.Context, s *Service, id, bearer string, body []byte,
	byOperator func(context.Context, string, authn.Operator) (R, error),
	decode func([]byte) (T, error), byNode func(context.Context, string, T) (R, error)) (R, error) {
	var none R
	if bearer != "" {
		return asOperator(ctx, s, id, bearer, byOperator)
	}
	err := s.store.View(ctx, func(tx store.Tx) error {
		_, err := sessionOf(tx, id)
		return err
	})
	if err != nil {
		return none, err
	}
	if noProof(body) {
		return none, errNoProof
	}
	req, err := decode(body)
	if err != nil {
		return none, err
	}
	return byNode(ctx, id, req)
}

// errNoProof answers a request that could be an operator's or a node's and is neither: it
// carries no bearer and no body.
var errNoProof = proto.New(proto.NoSession, "no bearer token and no signed body sent; log in, or sign as the node")

// noProof reports whether a request body is empty, white space aside.
func noProof(body []byte) bool { return len(bytes.TrimSpace(body)) == 0 }

// RejectBy rejects session id for the operator whose bearer token came with the request.
func (s *Service) RejectBy(ctx context.Context, id, bearer string) (api.StateResult, error) {
	return asOperator(ctx, s, id, bearer, s.RejectByOperator)
}

// NodeRejectBy rejects session id as its node, from the request's Authorization header and
// body as received: a request with neither proves nothing and is NO_SESSION, as in
// eitherForm; any other body is the node's signed rejection.
func (s *Service) NodeRejectBy(ctx context.Context, id, bearer string, body []byte) (api.StateResult, error) {
	if noProof(body) && bearer == "" {
		return api.StateResult{}, errNoProof
	}
	acc, err := api.DecodeAcceptance(body)
	if err != nil {
		return api.StateResult{}, err
	}
	return s.RejectByNode(ctx, id, acc)
}

// asOperator runs an operator's action on session id in the protocol's order: an unknown id
// first, then the bearer, then the action's own checks. The id and the bearer are read in
// one View; the action reads the session again in its own transaction.
func asOperator[R any](ctx context.Context, s *Service, id, bearer string, act func(context.Context, string, authn.Operator) (R, error)) (R, error) {
	var op authn.Operator
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		if _, err = sessionOf(tx, id); err != nil {
			return err
		}
		op, err = s.authenticate(tx, bearer)
		return err
	})
	if err != nil {
		var none R
		return none, err
	}
	return act(ctx, id, op)
}

// CancelByOperator cancels a session as the operator that resolved it.
func (s *Service) CancelByOperator(ctx context.Context, id string, op authn.Operator) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, id, now, byResolvingOperator(op, binding.Cancel, now, "only the operator that resolved this session may cancel it"))
}

// CancelByNode cancels a session with the node's signature over message 9.
func (s *Service) CancelByNode(ctx context.Context, id string, req api.NodeCancelRequest) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, id, now, sessionChange{verify: func(sess binding.BindingSession) (binding.BindingSession, error) {
		d, err := parseNodeDID(req.NodeDID)
		if err != nil {
			return sess, err
		}
		if !d.Matches(sess.NodeKey) {
			return sess, proto.New(proto.PermissionDenied, "node_did does not name this session's node")
		}
		msg := canonical.Cancel{BindingSessionID: id, NodeDID: req.NodeDID, TS: req.TS}
		if err := s.nodeChecker.CheckBound(sess.NodeKey, msg, req.Signature); err != nil {
			return sess, err
		}
		return binding.Apply(sess, binding.Cancel, now)
	}})
}

// RejectByOperator refuses a resolved session as its operator (PENDING_OPERATOR →
// REJECTED_BY_OPERATOR).
func (s *Service) RejectByOperator(ctx context.Context, id string, op authn.Operator) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, id, now, byResolvingOperator(op, binding.OperatorReject, now, "only the operator that resolved this session may reject it"))
}

// Pending lists the authorizations awaiting a node (sessions in PENDING_NODE_ACCEPTANCE).
func (s *Service) Pending(ctx context.Context, req api.PendingRequest) (api.PendingResult, error) {
	_, key, err := didkey.CheckNode(req.NodeDID, req.NodePublicKey)
	if err != nil {
		return api.PendingResult{}, err
	}
	now := s.now()
	msg := canonical.Poll{NodeDID: req.NodeDID, TS: req.TS}
	if err := s.nodeChecker.CheckBound(key, msg, req.Signature); err != nil {
		return api.PendingResult{}, err
	}
	out := api.PendingResult{Pending: []api.PendingAuthorization{}}
	err = s.store.View(ctx, func(tx store.Tx) error {
		mine, err := tx.OpenBindingSessionsByNode(key)
		if err != nil {
			return err
		}
		for _, m := range mine {
			m = binding.ExpireIfDue(m, now)
			if m.State != binding.PendingNodeAcceptance || m.DeviceCredential == nil || m.Authorization == nil {
				continue
			}
			out.Pending = append(out.Pending, api.PendingAuthorization{
				BindingSessionID: m.ID, OperatorDID: m.OperatorDID, Nonce: m.Request.Nonce,
				ExpiresAt:        canonical.FormatTime(m.ExpiresAt),
				DeviceCredential: *m.DeviceCredential, AuthorizationCredential: *m.Authorization,
			})
		}
		return nil
	})
	return out, err
}

// Accept records a node's acceptance and re-verifies the whole four-signature chain; the
// session becomes ACTIVE and the binding supersedes any older binding of the node key. On a
// verification failure the session stays PENDING_NODE_ACCEPTANCE.
func (s *Service) Accept(ctx context.Context, id string, acc binding.Acceptance) (api.AcceptResult, error) {
	now := s.now()
	var out api.AcceptResult
	_, err := s.changeSession(ctx, id, now, sessionChange{
		// VERIFYING is never written: the session moves through it to ACTIVE in one write,
		// and a failure leaves it as it was, so a crash cannot leave it behind.
		verify: func(sess binding.BindingSession) (binding.BindingSession, error) {
			if err := s.acceptable(sess, acc, true); err != nil {
				return sess, err
			}
			verifying, err := binding.Apply(sess, binding.Accept, now)
			if err != nil {
				return sess, err
			}
			if err := binding.VerifyChain(verifying, acc, s.prefix); err != nil {
				return sess, err
			}
			verifying.Acceptance = &acc
			return binding.Apply(verifying, binding.VerifyOK, now)
		},
		write: func(tx store.Tx, active binding.BindingSession) error {
			// A credential revoked while the session waited for the node must not make a
			// binding (docs/protocol.md §10.5); the session stays PENDING_NODE_ACCEPTANCE.
			if err := binding.CheckRevoked(*active.DeviceCredential, *active.Authorization, revocations(tx, *active.DeviceCredential)); err != nil {
				return err
			}
			if err := s.supersede(tx, active, now); err != nil {
				return err
			}
			b := binding.Activate(active, now)
			out = api.AcceptResult{BindingSessionID: active.ID, State: active.State.String(), Binding: bindingView(b)}
			if err := tx.PutBinding(b); err != nil {
				return err
			}
			var err error
			out.LogIndex, err = s.logBind(tx, active)
			return err
		},
	})
	if err != nil {
		return api.AcceptResult{}, err
	}
	s.tables.sessions.Remove(id)
	s.log.Debug("binding active", "binding_session_id", id, "node_did", out.Binding.NodeDID, "operator_did", out.Binding.OperatorDID)
	return out, nil
}

// supersede marks the session whose binding the activation of active replaces, so that its
// status reads unbound_by "superseded" from this moment (docs/protocol.md §10.6).
func (s *Service) supersede(tx store.Tx, active binding.BindingSession, now time.Time) error {
	old, err := tx.Binding(active.NodeKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || old.SessionID == active.ID {
		return err
	}
	prev, err := tx.BindingSession(old.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.PutBindingSession(binding.Supersede(prev, now))
}

// RejectByNode records a node's refusal (PENDING_NODE_ACCEPTANCE → REJECTED_BY_NODE).
func (s *Service) RejectByNode(ctx context.Context, id string, acc binding.Acceptance) (api.StateResult, error) {
	now := s.now()
	next, err := s.changeSession(ctx, id, now, sessionChange{verify: func(sess binding.BindingSession) (binding.BindingSession, error) {
		if err := s.acceptable(sess, acc, false); err != nil {
			return sess, err
		}
		if err := binding.VerifyAcceptanceSignature(sess, acc, s.prefix); err != nil {
			return sess, err
		}
		next, err := binding.Apply(sess, binding.NodeReject, now)
		if err != nil {
			return sess, err
		}
		next.Acceptance = &acc
		return next, nil
	}})
	if err != nil {
		return api.StateResult{}, err
	}
	s.tables.sessions.Remove(id)
	s.log.Debug("binding rejected by node", "binding_session_id", id)
	return api.StateResult{BindingSessionID: next.ID, State: next.State.String()}, nil
}

// acceptable runs the checks accept and node reject share on the session as read: it is
// waiting for the node, and the acceptance names it.
func (s *Service) acceptable(sess binding.BindingSession, acc binding.Acceptance, accepted bool) error {
	switch sess.State {
	case binding.Active:
		return proto.New(proto.AlreadyActive, "the binding is already active")
	case binding.PendingNodeAcceptance:
	default:
		return proto.New(proto.BadState, "the session is "+sess.State.String()+", not PENDING_NODE_ACCEPTANCE")
	}
	return binding.CheckAcceptance(sess, acc, s.prefix, accepted)
}

func bindingView(b binding.Binding) api.BindingView {
	return api.BindingView{NodeDID: b.NodeDID, OperatorDID: b.OperatorDID, BoundTerms: boundTerms(b)}
}

// boundTerms are the terms of b as an operator's views and an accept show them.
func boundTerms(b binding.Binding) api.BoundTerms {
	return api.BoundTerms{
		TaskTypes: nonNil(b.TaskTypes), SingleLimit: b.SingleLimit, DailyLimit: b.DailyLimit,
		RevocationID: b.RevocationID, ActivatedAt: canonical.FormatTime(b.ActivatedAt),
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
