package api

import "github.com/svrp/svrp/authn"

// Leaving and revoking (docs/protocol.md §10.4–10.6).

// OKResult is the answer of POST /v1/auth/logout.
type OKResult struct {
	OK bool `json:"ok"`
}

// DecodeRevocation reads the body of POST /v1/auth/revoke: {revocation: {operator_did,
// operator_root_public_key, revocation_id, revoked_at}, signature}, every field a required
// string. The values are judged by authn.VerifyRevocation.
func DecodeRevocation(body []byte) (authn.SignedRevocation, error) {
	return decodeWith(body, func(r *reader) authn.SignedRevocation {
		ro := r.obj("revocation")
		rev := reader{o: ro, err: r.err}
		var sr authn.SignedRevocation
		rev.message(&sr.Revocation)
		r.err = rev.err
		sr.Signature = r.str("signature")
		return sr
	})
}

// EndedBinding names a binding that a revocation ended.
type EndedBinding struct {
	BindingSessionID string `json:"binding_session_id"`
	NodeDID          string `json:"node_did"`
}

// RevokeResult is the answer to POST /v1/auth/revoke. AlreadyRevoked, EndedSessions and
// EndedBindings (ext) say what this request did: a revocation sent again is already
// revoked, keeps its first revoked_at and ends nothing new.
type RevokeResult struct {
	OK             bool           `json:"ok"`
	OperatorDID    string         `json:"operator_did"`
	RevocationID   string         `json:"revocation_id"`
	RevokedAt      string         `json:"revoked_at"`
	AlreadyRevoked bool           `json:"already_revoked"`
	EndedSessions  int            `json:"ended_sessions"`
	EndedBindings  []EndedBinding `json:"ended_bindings"`
	// LogIndex is the index of this write's entry in the transparency log (docs/protocol.md
	// §12); absent when the id was revoked already.
	LogIndex *int64 `json:"log_index,omitempty"`
}

// UnbindResult is the answer to POST /v1/bindings/{id}/unbind.
type UnbindResult struct {
	BindingSessionID string `json:"binding_session_id"`
	State            string `json:"state"`
	Bound            bool   `json:"bound"`
	UnboundAt        string `json:"unbound_at"`
	UnboundBy        string `json:"unbound_by"`
	// LogIndex is the index of this write's entry in the transparency log (docs/protocol.md
	// §12).
	LogIndex *int64 `json:"log_index,omitempty"`
}

// NodeUnbindRequest is the body of the node form of POST /v1/bindings/{id}/unbind: message
// 12 signed by the node key. Message 12 has the fields of message 9, so the body is that of
// the node form of cancel.
type NodeUnbindRequest = NodeCancelRequest

// DecodeNodeUnbind reads the body of the node form of POST /v1/bindings/{id}/unbind.
func DecodeNodeUnbind(body []byte) (NodeUnbindRequest, error) { return DecodeNodeCancel(body) }
