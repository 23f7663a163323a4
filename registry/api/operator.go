package api

import (
	"github.com/svrp/svrp/authn"
)

// ChallengeResult is the answer to POST /v1/auth/challenge.
type ChallengeResult struct {
	Challenge string `json:"challenge"`
	ExpiresIn int    `json:"expires_in"`
}

// LoginResult is the answer to a device login.
type LoginResult struct {
	SessionToken string `json:"session_token"`
	OperatorDID  string `json:"operator_did"`
	ExpiresIn    int    `json:"expires_in"`
}

// decodeCredential reads a DeviceCredential object: every field a required string but
// permissions, an optional array of strings (docs/protocol.md §5.2 step 1).
func decodeCredential(o object) (authn.DeviceCredential, error) {
	var dc authn.DeviceCredential
	if err := readSigned(o, &dc.DeviceCredential, &dc.Signature); err != nil {
		return authn.DeviceCredential{}, err
	}
	return dc, authn.CheckCredentialShape(dc)
}

func DecodeLogin(body []byte) (authn.Login, error) {
	return decodeWith(body, func(r *reader) authn.Login {
		dco := r.obj("device_credential")
		l := authn.Login{
			Challenge: r.str("challenge"),
			IssuedAt:  r.str("issued_at"),
			Signature: r.str("signature"),
		}
		l.DeviceCredential = nested(r, dco, decodeCredential)
		return l
	})
}

// BoundNode is one entry of GET /v1/operator/me/nodes (docs/protocol.md §4.5).
type BoundNode struct {
	NodeDID string `json:"node_did"`
	// BindingSessionID is the session that made the binding (ext): the id an unbind names.
	BindingSessionID string     `json:"binding_session_id"`
	Online           bool       `json:"online"`
	LastSeen         *string    `json:"last_seen"`
	Endpoint         *string    `json:"endpoint"`
	Region           *string    `json:"region"`
	Capabilities     []string   `json:"capabilities"`
	Authorization    BoundTerms `json:"authorization"`
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
	// Next is the cursor of the next page, when a limit cut this one short.
	Next string `json:"next,omitempty"`
}

// Amount is one bucket of the credits view.
type Amount struct {
	Amount  float64 `json:"amount"`
	Meaning string  `json:"meaning"`
}

// SourceNotYetWired is the source of the credits and evidence views while nothing feeds
// them: every amount is a placeholder and an empty evidence list means unknown.
const SourceNotYetWired = "not_yet_wired"

// Credits is the credits view (docs/protocol.md §5.3). Its three buckets are never summed.
type Credits struct {
	OperatorDID string `json:"operator_did"`
	Unit        string `json:"unit"`
	Disclaimer  string `json:"disclaimer"`
	Settled     Amount `json:"settled"`
	Pending     Amount `json:"pending"`
	Estimated   Amount `json:"estimated"`
	Source      string `json:"source"`
}

// Evidence is the evidence view (docs/protocol.md §5.3).
type Evidence struct {
	OperatorDID string `json:"operator_did"`
	Count       int    `json:"count"`
	Evidence    []any  `json:"evidence"`
	Source      string `json:"source"`
	Note        string `json:"note"`
}
