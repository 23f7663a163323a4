package registry

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/admission"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/netblock"
	"github.com/svrp/svrp/sigverify"
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
// the client address: failed logins are counted per address and per address and operator
// DID, never per DID alone, so failures only refuse the address that made them; and the
// attempts of one address per challenge lifetime are bounded, so that no one party can fill
// the used-challenge set (package registry/limits). The checks and their order are authn.VerifyLogin's; the
// registry answers its questions from the store: the operator DID's pin (DID_COLLISION when
// pinned to another root key, §10.8) and the revocation list. A login that got past the pin
// pins the operator DID to the credential's root key however it ends, and a successful one
// records on the pin that the root key logged in.
func (s *Service) Login(ctx context.Context, l authn.Login, addr string) (api.LoginResult, error) {
	now := s.now()
	if s.checker != nil {
		return s.loginShared(ctx, l, addr, now)
	}
	pair := failurePair(addr, l.DeviceCredential.OperatorDID)
	if byAddr, byBlock := s.loginFailAddr.Spent(addr, s.limits.LoginFailureAddressLimit, now); byAddr || byBlock {
		return api.LoginResult{}, budget.RateLimited(budget.Pick(byBlock, budget.LimitLoginFailuresPerBlock, budget.LimitLoginFailuresPerAddress), "too many failed logins from this address; wait and try again")
	}
	if s.loginFailPair.Count(pair, now) >= s.limits.LoginFailureOperatorLimit {
		return api.LoginResult{}, budget.RateLimited(budget.LimitLoginFailuresPerOperator, "too many failed logins for this operator from this address; wait and try again")
	}
	if err := s.bearerRoom(ctx, addr, l.DeviceCredential.OperatorDID, now); err != nil {
		return api.LoginResult{}, err
	}
	if byAddr, byBlock := s.loginAttempts.Take(addr, s.limits.LoginAddressLimit, now); byAddr || byBlock {
		return api.LoginResult{}, budget.RateLimited(budget.Pick(byBlock, budget.LimitLoginsPerBlock, budget.LimitLoginsPerAddress), "too many logins from this address; wait and try again")
	}
	var dev authn.Device
	var state loginState
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		state = loginState{tx: tx, proof: s.credentialProof(l.DeviceCredential)}
		dev, err = authn.VerifyLoginWith(s.verifier, l, s.prefix, now, s.challenges, &state, &state)
		return err
	})
	if err != nil {
		if proto.CodeOf(err) != proto.Internal {
			s.loginFailAddr.Add(addr, now)
			s.loginFailPair.Add(pair, now)
		}
		if state.pinsOnFailure(err) {
			// The login failed whatever the pin does: a pin that cannot be written now is
			// written by the operator's next login that gets this far.
			if perr := s.store.Update(ctx, func(tx store.Tx) error { return state.pin(tx, now) }); perr != nil && !errors.Is(perr, authn.ErrDIDCollision) {
				s.log.Warn("pinning the operator DID of a failed login", "err", perr)
			}
		}
		return api.LoginResult{}, err
	}
	tail, err := s.startSession(ctx, dev, addr, now)
	if err != nil {
		return api.LoginResult{}, err
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		return s.writeSession(passedAs(tx, dev, state.proof), tail, now)
	})
	return s.endSession(tail, now, err)
}

// loginShared is Login on a store shared by several registries: the challenge is consumed
// in the store, and the login budgets are store counters, so that neither a challenge nor a
// budget multiplies by the number of daemons.
//
// The budgets are one read before any verification. The login's checks then run twice,
// both times as authn.VerifyLoginWith orders them: first with no transaction open and every
// answer of the store passing (no pin, no revocation, the challenge only checked), which
// verifies the signatures; then in one write transaction with the store's answers — the
// pin, the revocation list, the challenge consumed — and the signatures' verdicts of the
// first run, so that the answer is the protocol's and no Ed25519 work is done in the
// transaction. That transaction ends every attempt that passes the budgets: it writes the
// session when the login succeeds, and otherwise records the failure, the pin of a login
// that got past it and the consumption of a challenge that passed step 5, which are kept
// whatever came after. It counts the attempt and checks its budget in one step, so that
// budget holds however many logins run at once; the failure budgets are read before
// verifying and not again, as the in-memory ones are, so concurrent failures of one address
// may pass them by the attempts in flight. The session cannot outlive a revocation that
// lands meanwhile, as the revocation is read where the session is written.
func (s *Service) loginShared(ctx context.Context, l authn.Login, addr string, now time.Time) (api.LoginResult, error) {
	dc := l.DeviceCredential
	block := netblock.BlockOf(addr)
	keys := loginKeys{
		attempts: "login-addr/" + addr, attemptsBlock: "login-addr/" + block,
		failAddr: "login-fail-addr/" + addr, failBlock: "login-fail-addr/" + block,
		failPair: "login-fail-pair/" + failurePair(addr, dc.OperatorDID),
	}
	if err := s.bearerRoom(ctx, addr, l.DeviceCredential.OperatorDID, now); err != nil {
		return api.LoginResult{}, err
	}
	if err := s.loginBudgets(ctx, keys, now); err != nil {
		return api.LoginResult{}, err
	}
	sigs := &memoVerifier{v: s.verifier}
	dev, verr := authn.VerifyLoginWith(sigs, l, s.prefix, now, storedChallenges{Challenges: s.challenges, checker: s.checker}, nil, nil)
	var tail *loginTail
	if verr == nil {
		var err error
		if tail, err = s.startSession(ctx, dev, addr, now); err != nil {
			return api.LoginResult{}, err
		}
	}
	var failed error // why the login failed, when the transaction records a failure
	err := s.store.Update(ctx, func(tx store.Tx) error {
		attempts, err := tx.CountEvent(keys.attempts, now, authn.ChallengeTTL)
		if err != nil {
			return err
		}
		inBlock, err := tx.CountEvent(keys.attemptsBlock, now, authn.ChallengeTTL)
		if err != nil {
			return err
		}
		// This attempt is counted: over the budget, the transaction is undone, count included.
		if attempts.Count > s.limits.LoginAddressLimit {
			return budget.RateLimited(budget.LimitLoginsPerAddress, "too many logins from this address; wait and try again")
		}
		if inBlock.Count > budget.BlockLimit(s.limits.LoginAddressLimit, s.limits.AddressBlockFactor) {
			return budget.RateLimited(budget.LimitLoginsPerBlock, "too many logins from this address block; wait and try again")
		}
		state := loginState{tx: tx, proof: s.credentialProof(l.DeviceCredential)}
		ch := storedChallenges{Challenges: s.challenges, checker: s.checker, tx: tx}
		// A login that failed above fails here too, at the same check or an earlier one:
		// every answer here is the first run's or stricter.
		_, failed = authn.VerifyLoginWith(sigs, l, s.prefix, now, ch, &state, &state)
		if failed != nil {
			if proto.CodeOf(failed) == proto.Internal {
				return failed
			}
			for _, k := range []string{keys.failAddr, keys.failBlock, keys.failPair} {
				if _, err := tx.CountEvent(k, now, limits.LoginWindow); err != nil {
					return err
				}
			}
			if state.pinsOnFailure(failed) {
				return state.pin(tx, now)
			}
			return nil
		}
		if tail == nil { // the first run failed, so this stricter one cannot have passed
			return verr
		}
		return s.writeSession(&state, tail, now)
	})
	if tail == nil {
		return api.LoginResult{}, cmp.Or(err, failed)
	}
	return s.endSession(tail, now, cmp.Or(err, failed))
}

// loginTail is what a login that passed its checks leaves to write: the bearer session of
// its device, and the session's place in the bearer table. Both login paths end with it
// (startSession, writeSession, endSession), so that what a login writes, and the last read of
// the revocation list it is written against, is one code.
type loginTail struct {
	dev       authn.Device
	token     string
	hash      [32]byte
	sess      authn.BearerSession
	place     *admission.Reservation[[32]byte]
	displaced *[32]byte
}

// startSession makes the bearer session of dev's login from addr and reserves its place,
// which a full bearer table may refuse (429).
func (s *Service) startSession(ctx context.Context, dev authn.Device, addr string, now time.Time) (*loginTail, error) {
	token, hash, err := authn.NewToken(s.rand)
	if err != nil {
		return nil, err
	}
	t := &loginTail{dev: dev, token: token, hash: hash, sess: authn.NewBearerSession(dev.OperatorDID.String(), now)}
	t.sess.RevocationID = dev.Credential.RevocationID
	t.sess.Origin = addr
	if t.place, t.displaced, err = s.reserveBearer(ctx, addr, t.sess.OperatorDID, now); err != nil {
		return nil, err
	}
	return t, nil
}

// writeSession records t's login in the transaction of st, the state of the login that
// passed: the operator's pin, marked as logged in, the bearer table's hold and the session.
// It asks the revocation list here, in the transaction that writes the session, whatever the
// login's checks read before: a revocation that landed since cannot be outlived by the
// session it would have refused. In the transaction of the checks, st answers from what
// they read.
func (s *Service) writeSession(st *loginState, t *loginTail, now time.Time) error {
	if err := authn.CheckCredentialRevoked(t.dev.Credential, st); err != nil {
		return err
	}
	if _, err := pinOperator(st.tx, t.dev.OperatorDID, t.dev.RootKey, now, true, st.proof); err != nil {
		return err
	}
	if err := s.holdBearer(st.tx, t.sess.OperatorDID, t.displaced); err != nil {
		return err
	}
	return st.tx.PutBearerSession(t.hash, t.sess)
}

// endSession gives t's place up when its write failed with err, and otherwise takes it and
// answers the login.
func (s *Service) endSession(t *loginTail, now time.Time, err error) (api.LoginResult, error) {
	if err != nil {
		t.place.Cancel()
		return api.LoginResult{}, err
	}
	t.place.Commit(t.hash, now, t.sess.ExpiresAt)
	return s.loggedIn(t.sess, t.token), nil
}

// loginKeys are the counters of one login's budgets.
type loginKeys struct{ attempts, attemptsBlock, failAddr, failBlock, failPair string }

// failurePair is the key of the failures of one client address naming one operator DID: the
// address and a digest of the DID, so that an entry's size does not depend on what a
// stranger wrote as the DID.
func failurePair(addr, did string) string {
	sum := sha256.Sum256([]byte(did))
	return addr + "\x00" + hex.EncodeToString(sum[:16])
}

// readCounters reads counters outside any write, in one statement where the store can.
func (s *Service) readCounters(ctx context.Context, keys ...string) ([]store.Counter, error) {
	return s.store.ReadCounters(ctx, keys...)
}

// loginBudgets refuses a login over one of its budgets, as Login's in-memory ones do: the
// failures of the address, the failures of the address naming the operator, and the
// attempts of the address. The counters are one read, outside any transaction where the
// store can (one statement on PostgreSQL).
func (s *Service) loginBudgets(ctx context.Context, k loginKeys, now time.Time) error {
	c, err := s.readCounters(ctx, k.failAddr, k.failPair, k.attempts, k.failBlock, k.attemptsBlock)
	if err != nil {
		return err
	}
	failAddr, failPair, attempts, failBlock, attemptsBlock := c[0], c[1], c[2], c[3], c[4]
	factor := s.limits.AddressBlockFactor
	switch {
	case failAddr.Blocked(now, s.limits.LoginFailureAddressLimit, limits.LoginWindow):
		return budget.RateLimited(budget.LimitLoginFailuresPerAddress, "too many failed logins from this address; wait and try again")
	case failBlock.Blocked(now, budget.BlockLimit(s.limits.LoginFailureAddressLimit, factor), limits.LoginWindow):
		return budget.RateLimited(budget.LimitLoginFailuresPerBlock, "too many failed logins from this address block; wait and try again")
	case attemptsBlock.Blocked(now, budget.BlockLimit(s.limits.LoginAddressLimit, factor), authn.ChallengeTTL):
		return budget.RateLimited(budget.LimitLoginsPerBlock, "too many logins from this address block; wait and try again")
	case failPair.Blocked(now, s.limits.LoginFailureOperatorLimit, limits.LoginWindow):
		return budget.RateLimited(budget.LimitLoginFailuresPerOperator, "too many failed logins for this operator from this address; wait and try again")
	case attempts.Blocked(now, s.limits.LoginAddressLimit, authn.ChallengeTTL):
		return budget.RateLimited(budget.LimitLoginsPerAddress, "too many logins from this address; wait and try again")
	}
	return nil
}

// storedChallenges are the login challenges of a registry that consumes them in its store:
// the checker judges a challenge (issued here, unexpired), and Consume records it used in tx,
// where a second use is BAD_CHALLENGE. With no tx, Consume only checks, for the run of the
// checks made before the transaction.
type storedChallenges struct {
	authn.Challenges
	checker authn.ChallengeChecker
	tx      store.Tx
}

// Consume implements [authn.Challenges].
func (c storedChallenges) Consume(challenge string, now time.Time) error {
	id, expires, err := c.checker.Check(challenge, now)
	if err != nil || c.tx == nil {
		return err
	}
	if err := c.tx.ConsumeChallenge(id, expires); errors.Is(err, store.ErrChallengeUsed) {
		return authn.ErrBadChallenge.With("challenge was already used")
	} else if err != nil {
		return err
	}
	return nil
}

// memoVerifier verifies signatures with v and remembers each verdict, so that the checks of
// one login, run again inside a transaction, get the same verdicts without verifying again.
// A login verifies at most two signatures, so a list is all it needs. It serves one login,
// from one goroutine at a time.
type memoVerifier struct {
	v    sigverify.Verifier
	seen []verdict
}

type verdict struct {
	pub, msg, sig []byte
	ok            bool
}

// Verify implements [sigverify.Verifier].
func (m *memoVerifier) Verify(pub, msg, sig []byte) bool {
	for _, d := range m.seen {
		if bytes.Equal(d.pub, pub) && bytes.Equal(d.msg, msg) && bytes.Equal(d.sig, sig) {
			return d.ok
		}
	}
	ok := m.v.Verify(pub, msg, sig)
	m.seen = append(m.seen, verdict{bytes.Clone(pub), bytes.Clone(msg), bytes.Clone(sig), ok})
	return ok
}

func (s *Service) loggedIn(sess authn.BearerSession, token string) api.LoginResult {
	s.log.Debug("operator logged in", "operator_did", sess.OperatorDID)
	return api.LoginResult{SessionToken: token, OperatorDID: sess.OperatorDID, ExpiresIn: int(authn.SessionTTL / time.Second)}
}

// Authenticate returns the operator of a bearer Authorization header (NO_SESSION,
// SESSION_EXPIRED).
func (s *Service) Authenticate(ctx context.Context, header string) (authn.Operator, error) {
	var op authn.Operator
	err := s.store.View(ctx, func(tx store.Tx) (err error) {
		op, err = s.authenticate(tx, header)
		return err
	})
	return op, err
}

// authenticate is Authenticate within tx, for a use case that reads more than the bearer.
func (s *Service) authenticate(tx store.Tx, header string) (authn.Operator, error) {
	token, err := authn.ParseBearer(header)
	if err != nil {
		return authn.Operator{}, err
	}
	h := authn.HashToken(token)
	sess, err := tx.BearerSession(h)
	if errors.Is(err, store.ErrNotFound) {
		return authn.Operator{}, proto.New(proto.NoSession, "no session for this bearer token; log in")
	}
	if err != nil {
		return authn.Operator{}, err
	}
	now := s.now()
	op, err := sess.Operator(now)
	if err == nil {
		s.tables.bearers.Use(h, now)
	}
	return op, err
}

// BoundNodes lists the nodes actively bound to an operator. A node is online when it was
// seen within f's window: f.OnlineWithin when f.OnlineSet (0 keeps the nodes seen this
// second), DefaultOnlineWindow otherwise. Every bound node is listed whatever f's other
// fields say: they select listings, not this view.
func (s *Service) BoundNodes(ctx context.Context, op authn.Operator, f api.NodeFilter) (api.OperatorNodes, error) {
	window := DefaultOnlineWindow
	if f.OnlineSet {
		window = f.OnlineWithin
	}
	now := s.now()
	out := api.OperatorNodes{OperatorDID: op.DID, Nodes: []api.BoundNode{}}
	err := s.store.View(ctx, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(op.DID)
		if err != nil {
			return err
		}
		slices.SortFunc(bs, func(a, b binding.Binding) int {
			if c := a.ActivatedAt.Compare(b.ActivatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.NodeDID, b.NodeDID) // a stable order for pages
		})
		for _, b := range bs {
			e := api.BoundNode{
				NodeDID:          b.NodeDID,
				BindingSessionID: b.SessionID,
				Capabilities:     []string{},
				Authorization:    boundTerms(b),
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
		Source:      api.SourceNotYetWired,
	}
}

// EvidenceView returns the evidence view of an operator: empty, with source not_yet_wired.
func (s *Service) EvidenceView(op authn.Operator) api.Evidence {
	return api.Evidence{OperatorDID: op.DID, Evidence: []any{}, Source: api.SourceNotYetWired, Note: EvidenceNote}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
