package registry

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// errCodeNotFound is the one answer to every failed resolve: invalid, expired and used codes
// must be indistinguishable, down to the bytes (description 7, rule 1).
var errCodeNotFound = proto.New(proto.NotFound, "binding code not found")

func errSessionNotFound() error {
	return proto.New(proto.NotFound, "no binding session with this id")
}

// Initiate opens a binding session from a node's signed description (docs/protocol.md §5.4). addr is
// the client address (limits.go): its initiates are counted per initiateWindow.
func (s *Service) Initiate(ctx context.Context, req binding.InitiateRequest, addr string) (api.InitiateResult, error) {
	now := s.now()
	key, err := binding.CheckInitiate(req, now)
	if err != nil {
		return api.InitiateResult{}, err
	}
	budgets := initiateKeys{addr: "initiate-addr/" + addr, key: "initiate-key/" + key.Hex()}
	if err := s.initiateBudgets(ctx, budgets, now); err != nil {
		return api.InitiateResult{}, err
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
	// The global cap is held in memory: a slot is taken before the write and given back if
	// the write does not happen, so concurrent initiates cannot overshoot it.
	if !s.openSessions.reserve(sess.ID, sess.ExpiresAt, s.limits.MaxOpenBindingSessions, now) {
		s.capReached(&s.warnSessions, "open binding sessions", s.limits.MaxOpenBindingSessions)
		return api.InitiateResult{}, rateLimited(LimitOpenSessions, "the registry holds too many open binding sessions; try again later")
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if used, err := tx.BindingSessionIDUsed(req.BindingSessionID); err != nil {
			return err
		} else if used {
			return proto.New(proto.SessionExists, "this binding_session_id was already used")
		}
		c, err := tx.Counters(budgets.addr, budgets.key)
		if err != nil {
			return err
		}
		if err := s.initiateAllowed(c[0], c[1], now); err != nil {
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
			return rateLimited(LimitOpenSessionsPerNode, "this node has too many open binding sessions; cancel one or let it expire")
		}
		if err := tx.PutCounter(budgets.addr, c[0].Fail(now, initiateWindow)); err != nil {
			return err
		}
		if err := tx.PutCounter(budgets.key, c[1].Fail(now, initiateWindow)); err != nil {
			return err
		}
		return tx.PutBindingSession(sess)
	})
	if err != nil {
		s.openSessions.remove(sess.ID)
		return api.InitiateResult{}, err
	}
	s.log.Debug("binding initiated", "binding_session_id", sess.ID, "node_did", req.NodeDID)
	return api.InitiateResult{
		BindingSessionID: sess.ID, ShortCode: code, BindingToken: token,
		ExpiresAt: canonical.FormatTime(sess.ExpiresAt), State: sess.State.String(),
	}, nil
}

// initiateKeys names the counters of an initiate's two budgets: its client address's and its
// node key's.
type initiateKeys struct{ addr, key string }

// initiateBudgets refuses an initiate over either budget before its signature is verified;
// the write transaction checks them again (initiateAllowed) and counts the initiate.
func (s *Service) initiateBudgets(ctx context.Context, b initiateKeys, now time.Time) error {
	c, err := s.readCounters(ctx, b.addr, b.key)
	if err != nil {
		return err
	}
	return s.initiateAllowed(c[0], c[1], now)
}

func (s *Service) initiateAllowed(byAddr, byKey binding.Counter, now time.Time) error {
	switch {
	case byAddr.Blocked(now, s.limits.InitiateAddressLimit, initiateWindow):
		return rateLimited(LimitInitiatePerAddress, "too many binding initiates from this address; wait and try again")
	case byKey.Blocked(now, s.limits.InitiateKeyLimit, initiateWindow):
		return rateLimited(LimitInitiatePerKey, "too many binding initiates for this node key; wait and try again")
	}
	return nil
}

// Resolve moves the session a code names from INITIATED to PENDING_OPERATOR and shows it to
// the operator. Every failure is the same NOT_FOUND; failures are counted per code and per
// client address, and over either limit the answer is RATE_LIMITED.
func (s *Service) Resolve(ctx context.Context, op authn.Operator, req api.ResolveRequest, addr string) (api.ResolveView, error) {
	presented := binding.NormalizeCode(req.ShortCode)
	if req.ShortCode == "" {
		presented = req.BindingToken
	}
	// Look up by hash, never by string, so the time a failure takes says nothing about
	// whether the code ever existed.
	h := binding.HashSecret(presented)
	// Failures are counted per code, per client address, per operator and over all
	// clients (limits.go): a guesser gains nothing from many addresses or many sessions.
	budgets := []struct {
		key   string
		limit int
		name  string // the limit's name in a refusal (LimitResolvePerCode, ...)
	}{
		{"resolve-code/" + hex.EncodeToString(h[:]), binding.ResolveFailureLimit, LimitResolvePerCode},
		{"resolve-addr/" + addr, s.resolveAddressLimit, LimitResolvePerAddress},
		{"resolve-op/" + op.DID, s.limits.ResolveOperatorLimit, LimitResolvePerOperator},
		{"resolve-all", s.limits.ResolveGlobalLimit, LimitResolveGlobal},
	}
	codeKey := budgets[0].key
	now := s.now()
	var view api.ResolveView
	var outcome error
	err := s.store.Update(ctx, func(tx store.Tx) error {
		outcome = nil
		counters := make([]binding.Counter, len(budgets))
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
		if blocked != "" {
			outcome = rateLimited(blocked, "too many failed resolves; wait and try again")
			return nil
		}
		sess, found, err := s.sessionBySecret(tx, h, now)
		if err != nil {
			return err
		}
		var next binding.BindingSession
		if found {
			next, err = binding.Apply(sess, binding.Resolve, now)
		}
		if !found || err != nil {
			outcome = errCodeNotFound
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
		err = outcome
	}
	if err != nil {
		return api.ResolveView{}, err
	}
	s.log.Debug("binding resolved", "binding_session_id", view.BindingSessionID, "operator_did", op.DID)
	return view, nil
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
// PENDING_NODE_ACCEPTANCE.
func (s *Service) Authorize(ctx context.Context, op authn.Operator, req api.AuthorizeRequest) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, req.BindingSessionID, func(tx store.Tx, v *verified, sess binding.BindingSession) (binding.BindingSession, error) {
		next, err := binding.Apply(sess, binding.Authorize, now)
		if err != nil {
			return sess, err
		}
		if sess.OperatorDID != op.DID || req.DeviceCredential.OperatorDID != op.DID {
			return sess, proto.New(proto.PermissionDenied, "only the operator that resolved this session may authorize it, with its own credential")
		}
		err = v.check(sess, func() error {
			return binding.VerifyAuthorization(sess, req.DeviceCredential, req.AuthorizationCredential, s.prefix, now, revocations(tx))
		})
		if err == nil {
			// Revocations are read again where the session is written.
			err = binding.CheckRevoked(req.DeviceCredential, req.AuthorizationCredential, revocations(tx))
		}
		if err != nil {
			return sess, err
		}
		dc, az := req.DeviceCredential, req.AuthorizationCredential
		next.DeviceCredential, next.Authorization = &dc, &az
		return next, nil
	})
}

// transition runs one state change of an existing session atomically: not found → NOT_FOUND,
// expiry applied first, and nothing written unless change succeeds.
func (s *Service) transition(ctx context.Context, id string, change func(store.Tx, *verified, binding.BindingSession) (binding.BindingSession, error)) (api.StateResult, error) {
	now := s.now()
	var out api.StateResult
	err := s.updateVerified(ctx, func(tx store.Tx, v *verified) error {
		sess, err := tx.BindingSession(id)
		if errors.Is(err, store.ErrNotFound) {
			return errSessionNotFound()
		}
		if err != nil {
			return err
		}
		next, err := change(tx, v, binding.ExpireIfDue(sess, now))
		if err != nil {
			return err
		}
		out = api.StateResult{BindingSessionID: next.ID, State: next.State.String()}
		return tx.PutBindingSession(next)
	})
	if err != nil {
		return api.StateResult{}, err
	}
	if st, _ := binding.ParseState(out.State); st.Terminal() {
		s.openSessions.remove(out.BindingSessionID)
	}
	s.log.Debug("binding moved", "binding_session_id", out.BindingSessionID, "state", out.State)
	return out, nil
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
// cancelBy and unbindBy pick the form.

// cancelBy cancels session id in the form the request takes.
func (s *Service) cancelBy(ctx context.Context, id, bearer string, body []byte) (api.StateResult, error) {
	return eitherForm(ctx, s, id, bearer, body, s.CancelByOperator, api.DecodeNodeCancel, s.CancelByNode)
}

// unbindBy ends the binding session id created, in the form the request takes.
func (s *Service) unbindBy(ctx context.Context, id, bearer string, body []byte) (api.UnbindResult, error) {
	return eitherForm(ctx, s, id, bearer, body, s.UnbindByOperator, api.DecodeNodeUnbind, s.UnbindByNode)
}

// eitherForm runs the operator's form of an action when a bearer came with the request, and
// the node's, decoded from body, when none did.
func eitherForm[T, R any](ctx context.Context, s *Service, id, bearer string, body []byte,
	byOperator func(context.Context, string, authn.Operator) (R, error),
	decode func([]byte) (T, error), byNode func(context.Context, string, T) (R, error)) (R, error) {
	if bearer != "" {
		return asOperator(ctx, s, id, bearer, byOperator)
	}
	req, err := decode(body)
	if err != nil {
		var none R
		return none, err
	}
	return byNode(ctx, id, req)
}

// rejectBy rejects session id for the operator whose bearer token came with the request.
func (s *Service) rejectBy(ctx context.Context, id, bearer string) (api.StateResult, error) {
	return asOperator(ctx, s, id, bearer, s.RejectByOperator)
}

// asOperator runs an operator's action on session id in the protocol's order: an unknown id
// first, then the bearer, then the action's own checks. The id and the bearer are read in
// one View; the action reads the session again in its own transaction.
func asOperator[R any](ctx context.Context, s *Service, id, bearer string, act func(context.Context, string, authn.Operator) (R, error)) (R, error) {
	var op authn.Operator
	err := s.store.View(ctx, func(tx store.Tx) error {
		_, err := tx.BindingSession(id)
		if errors.Is(err, store.ErrNotFound) {
			return errSessionNotFound()
		}
		if err != nil {
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
	return s.transition(ctx, id, func(_ store.Tx, v *verified, sess binding.BindingSession) (binding.BindingSession, error) {
		if sess.OperatorDID == "" || sess.OperatorDID != op.DID {
			return sess, proto.New(proto.PermissionDenied, "only the operator that resolved this session may cancel it")
		}
		return binding.Apply(sess, binding.Cancel, now)
	})
}

// CancelByNode cancels a session with the node's signature over message 9.
func (s *Service) CancelByNode(ctx context.Context, id string, req api.NodeCancelRequest) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, id, func(_ store.Tx, v *verified, sess binding.BindingSession) (binding.BindingSession, error) {
		d, err := parseNodeDID(req.NodeDID)
		if err != nil {
			return sess, err
		}
		if !d.Matches(sess.NodeKey) {
			return sess, proto.New(proto.PermissionDenied, "node_did does not name this session's node")
		}
		msg := canonical.Cancel{BindingSessionID: id, NodeDID: req.NodeDID, TS: req.TS}
		if err := v.check(sess, func() error {
			return s.nodeChecker.CheckBound(sess.NodeKey, msg, req.Signature)
		}); err != nil {
			return sess, err
		}
		return binding.Apply(sess, binding.Cancel, now)
	})
}

// RejectByOperator refuses a resolved session as its operator (PENDING_OPERATOR →
// REJECTED_BY_OPERATOR).
func (s *Service) RejectByOperator(ctx context.Context, id string, op authn.Operator) (api.StateResult, error) {
	now := s.now()
	return s.transition(ctx, id, func(_ store.Tx, v *verified, sess binding.BindingSession) (binding.BindingSession, error) {
		if sess.OperatorDID == "" || sess.OperatorDID != op.DID {
			return sess, proto.New(proto.PermissionDenied, "only the operator that resolved this session may reject it")
		}
		return binding.Apply(sess, binding.OperatorReject, now)
	})
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
	err := s.updateVerified(ctx, func(tx store.Tx, v *verified) error {
		sess, err := s.acceptable(tx, id, acc, true, now)
		if err != nil {
			return err
		}
		// VERIFYING lives only inside this transaction: a failure reverts it by not
		// committing, and a crash cannot leave it behind.
		verifying, err := binding.Apply(sess, binding.Accept, now)
		if err != nil {
			return err
		}
		if err := v.check(verifying, func() error { return binding.VerifyChain(verifying, acc, s.prefix) }); err != nil {
			return err
		}
		// A credential revoked while the session waited for the node must not make a
		// binding (docs/protocol.md §10.5); the session stays PENDING_NODE_ACCEPTANCE.
		if err := binding.CheckRevoked(*verifying.DeviceCredential, *verifying.Authorization, revocations(tx)); err != nil {
			return err
		}
		verifying.Acceptance = &acc
		active, err := binding.Apply(verifying, binding.VerifyOK, now)
		if err != nil {
			return err
		}
		if err := s.supersede(tx, active, now); err != nil {
			return err
		}
		b := binding.Activate(active, now)
		if err := tx.PutBinding(b); err != nil {
			return err
		}
		out = api.AcceptResult{BindingSessionID: active.ID, State: active.State.String(), Binding: bindingView(b)}
		return tx.PutBindingSession(active)
	})
	if err != nil {
		return api.AcceptResult{}, err
	}
	s.openSessions.remove(id)
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
	var out api.StateResult
	err := s.updateVerified(ctx, func(tx store.Tx, v *verified) error {
		sess, err := s.acceptable(tx, id, acc, false, now)
		if err != nil {
			return err
		}
		if err := v.check(sess, func() error { return binding.VerifyAcceptanceSignature(sess, acc, s.prefix) }); err != nil {
			return err
		}
		next, err := binding.Apply(sess, binding.NodeReject, now)
		if err != nil {
			return err
		}
		next.Acceptance = &acc
		out = api.StateResult{BindingSessionID: next.ID, State: next.State.String()}
		return tx.PutBindingSession(next)
	})
	if err != nil {
		return api.StateResult{}, err
	}
	s.openSessions.remove(id)
	s.log.Debug("binding rejected by node", "binding_session_id", id)
	return out, nil
}

// acceptable runs the checks accept and node reject share: the session exists, is waiting
// for the node, and the acceptance names it.
func (s *Service) acceptable(tx store.Tx, id string, acc binding.Acceptance, accepted bool, now time.Time) (binding.BindingSession, error) {
	sess, err := tx.BindingSession(id)
	if errors.Is(err, store.ErrNotFound) {
		return binding.BindingSession{}, errSessionNotFound()
	}
	if err != nil {
		return binding.BindingSession{}, err
	}
	sess = binding.ExpireIfDue(sess, now)
	switch sess.State {
	case binding.Active:
		return binding.BindingSession{}, proto.New(proto.AlreadyActive, "the binding is already active")
	case binding.PendingNodeAcceptance:
	default:
		return binding.BindingSession{}, proto.New(proto.BadState, "the session is "+sess.State.String()+", not PENDING_NODE_ACCEPTANCE")
	}
	return sess, binding.CheckAcceptance(sess, acc, s.prefix, accepted)
}

func bindingView(b binding.Binding) api.BindingView {
	return api.BindingView{
		NodeDID: b.NodeDID, OperatorDID: b.OperatorDID, TaskTypes: nonNil(b.TaskTypes),
		SingleLimit: b.SingleLimit, DailyLimit: b.DailyLimit, RevocationID: b.RevocationID,
		ActivatedAt: canonical.FormatTime(b.ActivatedAt),
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
