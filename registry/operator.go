package registry

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/proto"
	"github.com/svrp/svrp/store"
)

// ChallengeResult is the answer to POST /v1/auth/challenge.
type ChallengeResult struct {
	Challenge string `json:"challenge"`
	ExpiresIn int    `json:"expires_in"`
}

// Challenge issues a single-use login challenge.
func (s *Service) Challenge() (ChallengeResult, error) {
	c, err := s.challenges.Issue(s.now())
	if err != nil {
		return ChallengeResult{}, err
	}
	return ChallengeResult{Challenge: c, ExpiresIn: int(authn.ChallengeTTL / time.Second)}, nil
}

// LoginResult is the answer to a device login.
type LoginResult struct {
	SessionToken string `json:"session_token"`
	OperatorDID  string `json:"operator_did"`
	ExpiresIn    int    `json:"expires_in"`
}

// decodeCredential reads a DeviceCredential object: every field a required string but
// permissions, an optional array of strings (profile 5.2 step 1).
func decodeCredential(o object) (authn.DeviceCredential, error) {
	r := reader{o: o}
	var dc authn.DeviceCredential
	dc.CredentialID = r.str("credential_id")
	dc.OperatorDID = r.str("operator_did")
	dc.OperatorRootPublicKey = r.str("operator_root_public_key")
	dc.DeviceID = r.str("device_id")
	dc.DevicePublicKey = r.str("device_public_key")
	if _, present := o.raw("permissions"); present {
		dc.Permissions = r.strList("permissions")
	}
	dc.IssuedAt = r.str("issued_at")
	dc.ExpiresAt = r.str("expires_at")
	dc.RevocationID = r.str("revocation_id")
	dc.Signature = r.str("signature")
	if r.err != nil {
		return authn.DeviceCredential{}, r.err
	}
	return dc, authn.CheckCredentialShape(dc)
}

func decodeLogin(body []byte) (authn.Login, error) {
	return decodeWith(body, func(r *reader) authn.Login {
		dco := r.obj("device_credential")
		l := authn.Login{
			Challenge: r.str("challenge"),
			IssuedAt:  r.str("issued_at"),
			Signature: r.str("signature"),
		}
		if r.err == nil {
			l.DeviceCredential, r.err = decodeCredential(dco)
		}
		return l
	})
}

// Login verifies a device login (profile 5.2) and opens a one-hour bearer session.
func (s *Service) Login(ctx context.Context, l authn.Login) (LoginResult, error) {
	now := s.now()
	dev, err := authn.VerifyLogin(l, s.prefix, now, s.challenges)
	if err != nil {
		return LoginResult{}, err
	}
	token, hash, err := authn.NewToken(s.rand)
	if err != nil {
		return LoginResult{}, err
	}
	sess := authn.NewSession(dev.OperatorDID.String(), now)
	if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.PutOperatorSession(hash, sess) }); err != nil {
		return LoginResult{}, err
	}
	s.log.Info("operator logged in", "operator_did", sess.OperatorDID)
	return LoginResult{SessionToken: token, OperatorDID: sess.OperatorDID, ExpiresIn: int(authn.SessionTTL / time.Second)}, nil
}

// Authenticate returns the operator DID of a bearer Authorization header (NO_SESSION,
// SESSION_EXPIRED).
func (s *Service) Authenticate(ctx context.Context, header string) (string, error) {
	token, err := authn.ParseBearer(header)
	if err != nil {
		return "", err
	}
	var sess authn.Session
	err = s.store.View(ctx, func(tx store.Tx) (err error) {
		sess, err = tx.OperatorSession(authn.HashToken(token))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", proto.New(proto.NoSession, "no session for this bearer token; log in")
	}
	if err != nil {
		return "", err
	}
	if err := sess.Check(s.now()); err != nil {
		return "", err
	}
	return sess.OperatorDID, nil
}

// BoundNode is one entry of GET /v1/operator/me/nodes (profile 4.5).
type BoundNode struct {
	NodeDID       string     `json:"node_did"`
	Online        bool       `json:"online"`
	LastSeen      *string    `json:"last_seen"`
	Endpoint      *string    `json:"endpoint"`
	Region        *string    `json:"region"`
	Capabilities  []string   `json:"capabilities"`
	Authorization BoundTerms `json:"authorization"`
}

// BoundTerms are the limits agreed at binding time.
type BoundTerms struct {
	TaskTypes    []string `json:"task_types"`
	SingleLimit  *float64 `json:"single_limit"`
	DailyLimit   *float64 `json:"daily_limit"`
	RevocationID string   `json:"revocation_id"`
	ActivatedAt  string   `json:"activated_at"`
}

// OperatorNodes is the answer to GET /v1/operator/me/nodes.
type OperatorNodes struct {
	OperatorDID string      `json:"operator_did"`
	Count       int         `json:"count"`
	Nodes       []BoundNode `json:"nodes"`
}

// BoundNodes lists the nodes actively bound to an operator; a node is online when it was
// seen within window (DefaultOnlineWindow when 0).
func (s *Service) BoundNodes(ctx context.Context, operatorDID string, window time.Duration) (OperatorNodes, error) {
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	return s.boundNodes(ctx, operatorDID, window)
}

// boundNodes is BoundNodes with the window taken as given, 0 included.
func (s *Service) boundNodes(ctx context.Context, operatorDID string, window time.Duration) (OperatorNodes, error) {
	now := s.now()
	out := OperatorNodes{OperatorDID: operatorDID, Nodes: []BoundNode{}}
	err := s.store.View(ctx, func(tx store.Tx) error {
		bs, err := tx.BindingsByOperator(operatorDID)
		if err != nil {
			return err
		}
		slices.SortFunc(bs, func(a, b binding.Binding) int { return a.ActivatedAt.Compare(b.ActivatedAt) })
		for _, b := range bs {
			e := BoundNode{
				NodeDID:      b.NodeDID,
				Capabilities: []string{},
				Authorization: BoundTerms{
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

// Amount is one bucket of the credits view.
type Amount struct {
	Amount  float64 `json:"amount"`
	Meaning string  `json:"meaning"`
}

// Credits is the credits view (profile 5.3). Its three buckets are never summed.
type Credits struct {
	OperatorDID string `json:"operator_did"`
	Unit        string `json:"unit"`
	Disclaimer  string `json:"disclaimer"`
	Settled     Amount `json:"settled"`
	Pending     Amount `json:"pending"`
	Estimated   Amount `json:"estimated"`
	Source      string `json:"source"`
}

// Statements every credits and evidence view carries (description 1, 2.6, 2.7).
const (
	CreditsDisclaimer = "Credits are a test unit. They are not cash, not redeemable, not convertible, and not a claim on future value. Source not_yet_wired: every amount is a placeholder, not a measurement; a zero means nothing is counting, not that nothing was earned."
	EvidenceNote      = "Source not_yet_wired: nothing is counting evidence yet. An empty list means unknown, not that nothing was contributed."
	SourceNotYetWired = "not_yet_wired"
)

// CreditsView returns the credits view of an operator: zeros, with source not_yet_wired.
func (s *Service) CreditsView(operatorDID string) Credits {
	return Credits{
		OperatorDID: operatorDID,
		Unit:        "test-credit",
		Disclaimer:  CreditsDisclaimer,
		Settled:     Amount{Meaning: "Confirmed by evidence verification and settlement."},
		Pending:     Amount{Meaning: "Evidence submitted, not yet verified or settled. It may never settle."},
		Estimated:   Amount{Meaning: "A beta model's guess. It is not a commitment or a forecast."},
		Source:      SourceNotYetWired,
	}
}

// Evidence is the evidence view (profile 5.3).
type Evidence struct {
	OperatorDID string `json:"operator_did"`
	Count       int    `json:"count"`
	Evidence    []any  `json:"evidence"`
	Source      string `json:"source"`
	Note        string `json:"note"`
}

// EvidenceView returns the evidence view of an operator: empty, with source not_yet_wired.
func (s *Service) EvidenceView(operatorDID string) Evidence {
	return Evidence{OperatorDID: operatorDID, Evidence: []any{}, Source: SourceNotYetWired, Note: EvidenceNote}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
