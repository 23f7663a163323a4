package api

import (
	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
)

// InitiateResult is the answer to POST /v1/bindings/initiate; code and token appear in no
// other answer.
type InitiateResult struct {
	BindingSessionID string `json:"binding_session_id"`
	ShortCode        string `json:"short_code"`
	BindingToken     string `json:"binding_token"`
	ExpiresAt        string `json:"expires_at"`
	State            string `json:"state"`
}

func DecodeInitiate(body []byte) (binding.InitiateRequest, error) {
	return decodeWith(body, func(r *reader) binding.InitiateRequest {
		var req binding.InitiateRequest
		r.message(&req.BindingSession)
		req.NodeSignature = r.str("node_signature")
		for _, f := range []string{"device_summary", "os", "region"} {
			if v, present := r.o.raw(f); present && string(v) == `""` && r.err == nil {
				r.err = badRequest("field " + f + " must be 1-256 bytes")
			}
		}
		return req
	})
}

// ResolveRequest is the body of POST /v1/bindings/resolve: a short code or a binding token,
// and the DID of the node that showed it (docs/protocol.md §10.9). With NodeDID, only a
// session of that node is found, and failures are budgeted per node rather than globally.
type ResolveRequest struct {
	ShortCode    string `json:"short_code,omitempty"`
	BindingToken string `json:"binding_token,omitempty"`
	NodeDID      string `json:"node_did,omitempty"`
}

func DecodeResolve(body []byte) (ResolveRequest, error) {
	return decodeWith(body, func(r *reader) ResolveRequest {
		req := ResolveRequest{ShortCode: r.optStr("short_code"), BindingToken: r.optStr("binding_token"), NodeDID: r.optStr("node_did")}
		if r.err == nil && req.ShortCode == "" && req.BindingToken == "" {
			r.err = badRequest("field short_code or binding_token is required")
		}
		return req
	})
}

// Requested is what the node asked for.
type Requested struct {
	TaskTypes   []string `json:"task_types"`
	SingleLimit *float64 `json:"single_limit"`
	DailyLimit  *float64 `json:"daily_limit"`
}

// ResolveView is what an operator sees for a code (docs/protocol.md §5.4, description 2.5).
type ResolveView struct {
	BindingSessionID         string    `json:"binding_session_id"`
	State                    string    `json:"state"`
	NodeDID                  string    `json:"node_did"`
	NodePublicKey            string    `json:"node_public_key"`
	NodePublicKeyFingerprint string    `json:"node_public_key_fingerprint"`
	DeviceSummary            *string   `json:"device_summary"`
	OS                       *string   `json:"os"`
	Region                   *string   `json:"region"`
	Requested                Requested `json:"requested"`
	Nonce                    string    `json:"nonce"`
	ExpiresAt                string    `json:"expires_at"`
	// CreatedAt and NodeSignature complete message 6 (the node's description) as the node
	// signed it, so that an operator's client can verify the description itself.
	CreatedAt     string `json:"created_at"`
	NodeSignature string `json:"node_signature"`
}

// AuthorizeRequest is the body of POST /v1/bindings/authorize.
type AuthorizeRequest struct {
	BindingSessionID        string                          `json:"binding_session_id"`
	DeviceCredential        authn.DeviceCredential          `json:"device_credential"`
	AuthorizationCredential binding.AuthorizationCredential `json:"authorization_credential"`
}

func decodeAuthorization(o object) (binding.AuthorizationCredential, error) {
	var az binding.AuthorizationCredential
	if err := readSigned(o, &az.Authorization, &az.Signature); err != nil {
		return binding.AuthorizationCredential{}, err
	}
	return az, binding.CheckAuthorizationShape(az)
}

func DecodeAuthorize(body []byte) (AuthorizeRequest, error) {
	return decodeWith(body, func(r *reader) AuthorizeRequest {
		req := AuthorizeRequest{BindingSessionID: r.str("binding_session_id")}
		dco, azo := r.obj("device_credential"), r.obj("authorization_credential")
		req.DeviceCredential = nested(r, dco, decodeCredential)
		req.AuthorizationCredential = nested(r, azo, decodeAuthorization)
		return req
	})
}

// StateResult is the answer of the binding endpoints that only move a state.
type StateResult struct {
	BindingSessionID string `json:"binding_session_id"`
	State            string `json:"state"`
}

// Status is the answer to GET /v1/bindings/{id}/status.
type Status struct {
	BindingSessionID string  `json:"binding_session_id"`
	State            string  `json:"state"`
	NodeDID          string  `json:"node_did"`
	OperatorDID      *string `json:"operator_did"`
	ExpiresAt        string  `json:"expires_at"`
	// Of an ACTIVE session only (docs/protocol.md §10.6): whether its binding is the node's current
	// one, and once it is not, when and why it ended.
	Bound     *bool   `json:"bound,omitempty"`
	UnboundAt *string `json:"unbound_at,omitempty"`
	UnboundBy *string `json:"unbound_by,omitempty"`
}

// NodeCancelRequest is the body of the node form of POST /v1/bindings/{id}/cancel.
type NodeCancelRequest struct {
	NodeDID   string `json:"node_did"`
	TS        int64  `json:"ts"`
	Signature string `json:"signature"`
}

func DecodeNodeCancel(body []byte) (NodeCancelRequest, error) {
	return decodeWith(body, func(r *reader) NodeCancelRequest {
		return NodeCancelRequest{NodeDID: r.str("node_did"), TS: r.integer("ts"), Signature: r.str("signature")}
	})
}

// PendingRequest is the body of POST /v1/node/bindings/pending.
type PendingRequest struct {
	NodeDID       string `json:"node_did"`
	NodePublicKey string `json:"node_public_key"`
	TS            int64  `json:"ts"`
	Signature     string `json:"signature"`
}

func DecodePending(body []byte) (PendingRequest, error) {
	return decodeWith(body, func(r *reader) PendingRequest {
		return PendingRequest{
			NodeDID: r.str("node_did"), NodePublicKey: r.str("node_public_key"),
			TS: r.integer("ts"), Signature: r.str("signature"),
		}
	})
}

// PendingAuthorization is one authorization awaiting a node's answer.
type PendingAuthorization struct {
	BindingSessionID        string                          `json:"binding_session_id"`
	OperatorDID             string                          `json:"operator_did"`
	Nonce                   string                          `json:"nonce"`
	ExpiresAt               string                          `json:"expires_at"`
	DeviceCredential        authn.DeviceCredential          `json:"device_credential"`
	AuthorizationCredential binding.AuthorizationCredential `json:"authorization_credential"`
}

// PendingResult is the answer to a node's poll.
type PendingResult struct {
	Pending []PendingAuthorization `json:"pending"`
}

// AcceptanceRequest is the body of POST /v1/node/bindings/{id}/accept and /reject.
type AcceptanceRequest struct {
	Acceptance binding.Acceptance `json:"acceptance"`
}

func DecodeAcceptance(body []byte) (binding.Acceptance, error) {
	return decodeWith(body, func(r *reader) binding.Acceptance {
		return nested(r, r.obj("acceptance"), decodeAcceptance)
	})
}

func decodeAcceptance(o object) (binding.Acceptance, error) {
	var acc binding.Acceptance
	if err := readSigned(o, &acc.Acceptance, &acc.Signature); err != nil {
		return binding.Acceptance{}, err
	}
	return acc, binding.CheckAcceptanceShape(acc)
}

// BindingView is an active binding as accept returns it.
type BindingView struct {
	NodeDID     string `json:"node_did"`
	OperatorDID string `json:"operator_did"`
	BoundTerms
}

// AcceptResult is the answer to an accept.
type AcceptResult struct {
	BindingSessionID string      `json:"binding_session_id"`
	State            string      `json:"state"`
	Binding          BindingView `json:"binding"`
	// LogIndex is the index of this write's entry in the transparency log (docs/protocol.md
	// §12).
	LogIndex *int64 `json:"log_index,omitempty"`
}
