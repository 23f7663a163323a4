package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/registry/api"
)

// The methods in this file send one endpoint's request as given: the caller has signed it.
// [Node] and [Operator] build and sign the requests themselves and are what most callers
// want.

// Register sends POST /api/v1/register.
func (c *Client) Register(ctx context.Context, req api.RegisterRequest) (api.RegisterResult, error) {
	return send[api.RegisterResult](ctx, c, request{method: http.MethodPost, path: "/api/v1/register", body: req, replaySafe: true})
}

// Heartbeat sends POST /api/v1/heartbeat.
func (c *Client) Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResult, error) {
	return send[api.HeartbeatResult](ctx, c, request{method: http.MethodPost, path: "/api/v1/heartbeat", body: req, replaySafe: true})
}

// Challenge sends POST /v1/auth/challenge. A challenge is single-use and lives 300 s: fetch
// it right before signing, never cache it.
func (c *Client) Challenge(ctx context.Context) (api.ChallengeResult, error) {
	return send[api.ChallengeResult](ctx, c, request{method: http.MethodPost, path: "/v1/auth/challenge"})
}

// DeviceLogin sends POST /v1/auth/device-login. It is not retried: the registry consumes the
// challenge before it checks the signature, so a second attempt with the same body can only
// fail with BAD_CHALLENGE. [Client.Login] retries the whole login with a fresh challenge.
func (c *Client) DeviceLogin(ctx context.Context, l authn.Login) (api.LoginResult, error) {
	var out api.LoginResult
	err := c.callOnce(ctx, request{method: http.MethodPost, path: "/v1/auth/device-login", body: l}, &out)
	return out, err
}

// OperatorNodes sends GET /v1/operator/me/nodes with a bearer token; window ≤ 0 lets the
// registry use its default of 600 s.
func (c *Client) OperatorNodes(ctx context.Context, token string, window time.Duration) (api.OperatorNodes, error) {
	var q url.Values
	if window > 0 {
		secs := (window + time.Second - 1) / time.Second
		q = url.Values{"online_within": {strconv.FormatInt(int64(secs), 10)}}
	}
	return send[api.OperatorNodes](ctx, c, request{method: http.MethodGet, path: "/v1/operator/me/nodes", query: q, token: token})
}

// OperatorCredits sends GET /v1/operator/me/credits with a bearer token and returns the raw
// envelope; see [Operator.Balance] for reading it as a balance.
func (c *Client) OperatorCredits(ctx context.Context, token string) (api.Credits, error) {
	return send[api.Credits](ctx, c, request{method: http.MethodGet, path: "/v1/operator/me/credits", token: token})
}

// OperatorEvidence sends GET /v1/operator/me/evidence with a bearer token.
func (c *Client) OperatorEvidence(ctx context.Context, token string) (api.Evidence, error) {
	return send[api.Evidence](ctx, c, request{method: http.MethodGet, path: "/v1/operator/me/evidence", token: token})
}

// Initiate sends POST /v1/bindings/initiate. The answer's short code and binding token are
// returned once and never again: a lost pair means cancelling and starting over.
func (c *Client) Initiate(ctx context.Context, req binding.InitiateRequest) (api.InitiateResult, error) {
	return send[api.InitiateResult](ctx, c, request{method: http.MethodPost, path: "/v1/bindings/initiate", body: req})
}

// Resolve sends POST /v1/bindings/resolve with a bearer token. Every failure to find the
// code is the same NOT_FOUND, by design.
func (c *Client) Resolve(ctx context.Context, token string, req api.ResolveRequest) (api.ResolveView, error) {
	return send[api.ResolveView](ctx, c, request{method: http.MethodPost, path: "/v1/bindings/resolve", token: token, body: req})
}

// Authorize sends POST /v1/bindings/authorize with a bearer token.
func (c *Client) Authorize(ctx context.Context, token string, req api.AuthorizeRequest) (api.StateResult, error) {
	return send[api.StateResult](ctx, c, request{method: http.MethodPost, path: "/v1/bindings/authorize", token: token, body: req})
}

// OperatorReject sends POST /v1/bindings/{id}/reject with a bearer token.
func (c *Client) OperatorReject(ctx context.Context, token, id string) (api.StateResult, error) {
	return send[api.StateResult](ctx, c, request{method: http.MethodPost, path: sessionPath(id, "reject"), token: token})
}

// OperatorCancel sends the operator form of POST /v1/bindings/{id}/cancel.
func (c *Client) OperatorCancel(ctx context.Context, token, id string) (api.StateResult, error) {
	return send[api.StateResult](ctx, c, request{method: http.MethodPost, path: sessionPath(id, "cancel"), token: token})
}

// NodeCancel sends the node form of POST /v1/bindings/{id}/cancel.
func (c *Client) NodeCancel(ctx context.Context, id string, req api.NodeCancelRequest) (api.StateResult, error) {
	return send[api.StateResult](ctx, c, request{method: http.MethodPost, path: sessionPath(id, "cancel"), body: req})
}

// Status sends GET /v1/bindings/{id}/status.
func (c *Client) Status(ctx context.Context, id string) (api.Status, error) {
	return send[api.Status](ctx, c, request{method: http.MethodGet, path: sessionPath(id, "status")})
}

// PendingAuthorizations sends POST /v1/node/bindings/pending.
func (c *Client) PendingAuthorizations(ctx context.Context, req api.PendingRequest) (api.PendingResult, error) {
	return send[api.PendingResult](ctx, c, request{method: http.MethodPost, path: "/v1/node/bindings/pending", body: req})
}

// Accept sends POST /v1/node/bindings/{id}/accept. A retry of an accept that the registry
// had already carried out answers ALREADY_ACTIVE: success arriving twice.
func (c *Client) Accept(ctx context.Context, id string, acc binding.Acceptance) (api.AcceptResult, error) {
	return send[api.AcceptResult](ctx, c, request{method: http.MethodPost, path: nodeSessionPath(id, "accept"), body: api.AcceptanceRequest{Acceptance: acc}})
}

// NodeReject sends POST /v1/node/bindings/{id}/reject.
func (c *Client) NodeReject(ctx context.Context, id string, acc binding.Acceptance) (api.StateResult, error) {
	return send[api.StateResult](ctx, c, request{method: http.MethodPost, path: nodeSessionPath(id, "reject"), body: api.AcceptanceRequest{Acceptance: acc}})
}

// callOnce is call without retries, for requests whose repetition cannot succeed.
func (c *Client) callOnce(ctx context.Context, req request, out any) error {
	one := *c
	one.retry.Retries = 0
	return one.call(ctx, req, out)
}

func sessionPath(id, action string) string {
	return "/v1/bindings/" + url.PathEscape(id) + "/" + action
}

func nodeSessionPath(id, action string) string {
	return "/v1/node/bindings/" + url.PathEscape(id) + "/" + action
}
