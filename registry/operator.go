package registry

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// Challenge issues a single-use login challenge.
func (s *Service) Challenge() (api.ChallengeResult, error) {
	c, err := s.challenges.Issue(s.now())
	if err != nil {
		return api.ChallengeResult{}, err
	}
	return api.ChallengeResult{Challenge: c, ExpiresIn: int(authn.ChallengeTTL / time.Second)}, nil
}

// Login verifies a device login (docs/protocol.md §5.2) and opens a one-hour bearer session. addr is
// the client address: failed logins are counted per address and per operator DID, and the
// attempts of one address per challenge lifetime are bounded, so that no one party can fill
// the used-challenge set (limits.go).
func (s *Service) Login(ctx context.Context, l authn.Login, addr string) (api.LoginResult, error) {
	now := s.now()
	did := l.DeviceCredential.OperatorDID
	pair := did + "\x00" + addr
	switch {
	case s.loginFailAddr.count(addr, now) >= s.limits.LoginFailureAddressLimit:
		return api.LoginResult{}, rateLimited(LimitLoginFailuresPerAddress, "too many failed logins from this address; wait and try again")
	case s.loginFailDID.count(did, now) >= s.limits.LoginFailureOperatorLimit && s.loginFailPair.count(pair, now) > 0:
		return api.LoginResult{}, rateLimited(LimitLoginFailuresPerOperator, "too many failed logins for this operator; wait and try again")
	case s.bearers.live(now) >= s.limits.MaxBearerSessions:
		s.capReached(&s.warnBearers, "bearer sessions", s.limits.MaxBearerSessions)
		return api.LoginResult{}, rateLimited(LimitBearerSessions, "the registry holds too many sessions; try again later")
	case !s.loginAttempts.takeBelow(addr, s.limits.LoginAddressLimit, now):
		return api.LoginResult{}, rateLimited(LimitLoginsPerAddress, "too many logins from this address; wait and try again")
	}
	// With challenges consumed in the store, step 5 only checks the challenge here; the
	// login's write transaction consumes it, or, when a later step failed, a transaction of
	// its own, since a challenge that passed step 5 is spent whatever came after. A second
	// use is BAD_CHALLENGE whatever else is wrong, as step 5 comes first.
	var ch *checkedChallenge
	challenges := s.challenges
	if s.checker != nil {
		ch = &checkedChallenge{Challenges: s.challenges, checker: s.checker}
		challenges = ch
	}
	var dev authn.Device
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		dev, err = authn.VerifyLogin(l, s.prefix, now, challenges, revocations(tx))
		return err
	})
	if err != nil && ch != nil && ch.id != nil {
		if cerr := s.store.Update(ctx, func(tx store.Tx) error { return consume(tx, ch) }); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		if proto.CodeOf(err) != proto.Internal {
			s.loginFailAddr.add(addr, now)
			s.loginFailDID.add(did, now)
			s.loginFailPair.add(pair, now)
		}
		return api.LoginResult{}, err
	}
	token, hash, err := authn.NewToken(s.rand)
	if err != nil {
		return api.LoginResult{}, err
	}
	sess := authn.NewBearerSession(dev.OperatorDID.String(), now)
	sess.RevocationID = dev.Credential.RevocationID
	id := hex.EncodeToString(hash[:])
	if !s.bearers.reserve(id, sess.ExpiresAt, s.limits.MaxBearerSessions, now) {
		s.capReached(&s.warnBearers, "bearer sessions", s.limits.MaxBearerSessions)
		return api.LoginResult{}, rateLimited(LimitBearerSessions, "the registry holds too many sessions; try again later")
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if err := consume(tx, ch); err != nil {
			return err
		}
		// A revocation may have landed since the check above; the session must not outlive
		// it, so the check is made again where the session is written.
		if err := authn.CheckCredentialRevoked(dev.Credential, revocations(tx)); err != nil {
			return err
		}
		return tx.PutBearerSession(hash, sess)
	})
	if err != nil {
		s.bearers.remove(id)
		return api.LoginResult{}, err
	}
	return s.loggedIn(sess, token), nil
}

// consume records a challenge checked at login step 5 as used, in tx, when challenges are
// consumed in the store; a second use is BAD_CHALLENGE.
func consume(tx store.Tx, ch *checkedChallenge) error {
	if ch == nil || ch.id == nil {
		return nil
	}
	cc, ok := tx.(store.ChallengeConsumer)
	if !ok {
		return proto.New(proto.Internal, "the store does not keep login challenges")
	}
	if err := cc.ConsumeChallenge(ch.id, ch.expires); errors.Is(err, store.ErrChallengeUsed) {
		return proto.New(proto.BadChallenge, "challenge was already used")
	} else if err != nil {
		return err
	}
	return nil
}

// checkedChallenge stands for the Challenges during one login whose challenge is consumed in
// the store: Consume only checks, and keeps what the store must record.
type checkedChallenge struct {
	authn.Challenges
	checker authn.ChallengeChecker
	id      []byte
	expires time.Time
}

func (c *checkedChallenge) Consume(challenge string, now time.Time) error {
	id, exp, err := c.checker.Check(challenge, now)
	if err != nil {
		return err
	}
	c.id, c.expires = id, exp
	return nil
}

func (s *Service) loggedIn(sess authn.BearerSession, token string) api.LoginResult {
	s.log.Info("operator logged in", "operator_did", sess.OperatorDID)
	return api.LoginResult{SessionToken: token, OperatorDID: sess.OperatorDID, ExpiresIn: int(authn.SessionTTL / time.Second)}
}

// Authenticate returns the operator of a bearer Authorization header (NO_SESSION,
// SESSION_EXPIRED).
func (s *Service) Authenticate(ctx context.Context, header string) (authn.Operator, error) {
	token, err := authn.ParseBearer(header)
	if err != nil {
		return authn.Operator{}, err
	}
	var sess authn.BearerSession
	err = s.store.View(ctx, func(tx store.Tx) (err error) {
		sess, err = tx.BearerSession(authn.HashToken(token))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return authn.Operator{}, proto.New(proto.NoSession, "no session for this bearer token; log in")
	}
	if err != nil {
		return authn.Operator{}, err
	}
	return sess.Operator(s.now())
}

// BoundNodes lists the nodes actively bound to an operator; a node is online when it was
// seen within window (DefaultOnlineWindow when 0).
func (s *Service) BoundNodes(ctx context.Context, op authn.Operator, window time.Duration) (api.OperatorNodes, error) {
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	return s.boundNodes(ctx, op, window)
}

// boundNodes is BoundNodes with the window taken as given, 0 included.
func (s *Service) boundNodes(ctx context.Context, op authn.Operator, window time.Duration) (api.OperatorNodes, error) {
	now := s.now()
	out := api.OperatorNodes{OperatorDID: op.DID, Nodes: []api.BoundNode{}}
	err := s.store.View(ctx, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(op.DID)
		if err != nil {
			return err
		}
		slices.SortFunc(bs, func(a, b binding.Binding) int { return a.ActivatedAt.Compare(b.ActivatedAt) })
		for _, b := range bs {
			e := api.BoundNode{
				NodeDID:          b.NodeDID,
				BindingSessionID: b.SessionID,
				Capabilities:     []string{},
				Authorization: api.BoundTerms{
					TaskTypes: nonNil(b.TaskTypes), SingleLimit: b.SingleLimit, DailyLimit: b.DailyLimit,
					RevocationID: b.RevocationID, ActivatedAt: canonical.FormatTime(b.ActivatedAt),
				},
			}
			n, err := tx.Node(b.NodeKey)
			switch {
			case err == nil:
				seen := canonical.FormatTime(n.LastSeen)
				e.LastSeen, e.Endpoint = &seen, &n.Endpoint
				e.Online = now.Sub(n.LastSeen) <= window
				e.Capabilities = nonNil(n.Capabilities)
				if n.Region != "" {
					e.Region = &n.Region
				}
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			out.Nodes = append(out.Nodes, e)
		}
		return nil
	})
	out.Count = len(out.Nodes)
	return out, err
}

// Statements every credits and evidence view carries (description 1, 2.6, 2.7).
const (
	CreditsDisclaimer = "Credits are a test unit. They are not cash, not redeemable, not convertible, and not a claim on future value. Source not_yet_wired: every amount is a placeholder, not a measurement; a zero means nothing is counting, not that nothing was earned."
	EvidenceNote      = "Source not_yet_wired: nothing is counting evidence yet. An empty list means unknown, not that nothing was contributed."
	SourceNotYetWired = "not_yet_wired"
)

// CreditsView returns the credits view of an operator: zeros, with source not_yet_wired.
func (s *Service) CreditsView(op authn.Operator) api.Credits {
	return api.Credits{
		OperatorDID: op.DID,
		Unit:        "test-credit",
		Disclaimer:  CreditsDisclaimer,
		Settled:     api.Amount{Meaning: "Confirmed by evidence verification and settlement."},
		Pending:     api.Amount{Meaning: "Evidence submitted, not yet verified or settled. It may never settle."},
		Estimated:   api.Amount{Meaning: "A beta model's guess. It is not a commitment or a forecast."},
		Source:      SourceNotYetWired,
	}
}

// EvidenceView returns the evidence view of an operator: empty, with source not_yet_wired.
func (s *Service) EvidenceView(op authn.Operator) api.Evidence {
	return api.Evidence{OperatorDID: op.DID, Evidence: []any{}, Source: SourceNotYetWired, Note: EvidenceNote}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
