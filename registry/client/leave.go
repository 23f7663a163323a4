package client

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
)

// Leaving and revoking (docs/protocol.md §10.4–10.6).

// Logout sends POST /v1/auth/logout: the session of token ends, and the token gets
// NO_SESSION from then on.
func (c *Client) Logout(ctx context.Context, token string) (api.OKResult, error) {
	return send[api.OKResult](ctx, c, request{method: http.MethodPost, path: "/v1/auth/logout", token: token})
}

// Revoke sends POST /v1/auth/revoke with a revocation signed by the root key (see
// [NewRevocation]). It needs no session: the signature is the authority. Sending one that the
// registry already recorded is harmless and answers with the first revoked_at.
func (c *Client) Revoke(ctx context.Context, r authn.SignedRevocation) (api.RevokeResult, error) {
	return send[api.RevokeResult](ctx, c, request{method: http.MethodPost, path: "/v1/auth/revoke", body: r})
}

// OperatorUnbind sends the operator form of POST /v1/bindings/{id}/unbind.
func (c *Client) OperatorUnbind(ctx context.Context, token, id string) (api.UnbindResult, error) {
	return send[api.UnbindResult](ctx, c, request{method: http.MethodPost, path: sessionPath(id, "unbind"), token: token})
}

// NodeUnbind sends the node form of POST /v1/bindings/{id}/unbind.
func (c *Client) NodeUnbind(ctx context.Context, id string, req api.NodeUnbindRequest) (api.UnbindResult, error) {
	return send[api.UnbindResult](ctx, c, request{method: http.MethodPost, path: sessionPath(id, "unbind"), body: req})
}

// NewRevocation builds and signs, with the operator's root key, the revocation of every
// credential of the operator that carries revocationID (message 11). It needs no network: an
// operator can make it the day the identity is created, keep it with the root key, and send
// it with [Client.Revoke] the day a device is lost. dc, when not nil, is a credential of that
// operator, whose operator_did and root key string the revocation repeats exactly; without it
// they are derived from the root key (short DID, base58 key), as [IssueDeviceCredential]
// writes them. prefix "" means "service"; revokedAt zero means now.
func NewRevocation(root ed25519.PrivateKey, prefix, revocationID string, revokedAt time.Time, dc *authn.DeviceCredential) (authn.SignedRevocation, error) {
	if prefix == "" {
		prefix = canonical.DefaultPrefix
	}
	if revokedAt.IsZero() {
		revokedAt = time.Now()
	}
	var op, key string
	if dc != nil {
		op, key = dc.OperatorDID, dc.OperatorRootPublicKey
	}
	return authn.SignRevocation(root, prefix, op, key, revocationID, revokedAt)
}

// Logout ends the operator's session; o cannot be used afterwards.
func (o *Operator) Logout(ctx context.Context) (api.OKResult, error) {
	res, err := o.Client.Logout(ctx, o.Token)
	if err == nil {
		o.Token = ""
	}
	return res, err
}

// Unbind ends the active binding that session sessionID created, as its operator: the node
// leaves the operator's list. The node's consent is not needed to leave.
func (o *Operator) Unbind(ctx context.Context, sessionID string) (api.UnbindResult, error) {
	return o.Client.OperatorUnbind(ctx, o.Token, sessionID)
}

// Unbind ends the active binding that session sessionID created, signed by the node key
// (message 12). The operator's consent is not needed to leave.
func (n *Node) Unbind(ctx context.Context, sessionID string) (api.UnbindResult, error) {
	req, err := n.sessionRequest(sessionID, true)
	if err != nil {
		return api.UnbindResult{}, err
	}
	return n.Client.NodeUnbind(ctx, sessionID, req)
}
