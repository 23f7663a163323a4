package client

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"slices"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pause"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// Node is a node's side of the protocol: every request it sends is signed with Key, under the
// client's prefix, with the client's clock.
type Node struct {
	Client *Client
	// Key is the node's Ed25519 private key.
	Key ed25519.PrivateKey `json:"-"`
	// DID is the spelling the node announces; "" means the short form derived from Key. Use
	// the 10-hex form (didkey.FormFallback) after a DID_COLLISION.
	DID string
	// RegisterV1 sends registrations without a signed ts (message 3), for a registry that
	// predates docs/protocol.md §10. By default Register sends v2 (message 10), which no one
	// can replay or roll back; once a registry holds a v2 registration of the key it refuses
	// v1 ones.
	RegisterV1 bool

	// lastRegisterTS is the ts of the last v2 registration sent, so that a second one within
	// the same second still carries a newer ts, as the registry requires.
	lastRegisterTS int64
}

// NewNode returns the node of key, announcing the DID of the given form.
func NewNode(c *Client, key ed25519.PrivateKey, form didkey.Form) (*Node, error) {
	pub, err := publicKey(key)
	if err != nil {
		return nil, err
	}
	did, err := didkey.NodeDID(pub, form)
	if err != nil {
		return nil, err
	}
	return &Node{Client: c, Key: key, DID: did.String()}, nil
}

// String names the node without its key, so a node printed by mistake leaks nothing.
func (n Node) String() string { return "svrp node " + n.DID }

// GoString is String, for %#v.
func (n Node) GoString() string { return n.String() }

// PublicKey returns the node's public key.
func (n *Node) PublicKey() didkey.PublicKey {
	pub, _ := publicKey(n.Key)
	return pub
}

// identity returns the DID to sign with and the public key, checking that they bind.
func (n *Node) identity() (string, didkey.PublicKey, error) {
	pub, err := publicKey(n.Key)
	if err != nil {
		return "", pub, err
	}
	if n.DID == "" {
		d, _ := didkey.NodeDID(pub, didkey.FormShort)
		return d.String(), pub, nil
	}
	if _, _, err := didkey.CheckNode(n.DID, pub.Hex()); err != nil {
		return "", pub, err
	}
	return n.DID, pub, nil
}

// Register announces the node (POST /api/v1/register), signed so that the registry records
// it as signature_verified: over message 10 with the client's clock as ts (docs/protocol.md §10.1), or
// over message 3 when RegisterV1 is set. Each call signs a ts newer than the last one's, so
// the client's clock must be within 300 s of the registry's (else STALE_TS). Calls on one
// Node must not run concurrently. A retry after a lost answer resends the same request,
// which the registry answers with the stored record.
func (n *Node) Register(ctx context.Context, endpoint string, capabilities []string, region string) (api.RegisterResult, error) {
	req, err := n.SignRegistration(endpoint, capabilities, region)
	if err != nil {
		return api.RegisterResult{}, err
	}
	return n.Client.Register(ctx, req)
}

// SignRegistration returns the request Register sends, signed and not sent, for a caller
// that sends it some other way or later (within 300 s of signing, for a v2 registration).
// Like Register, each call signs a ts newer than the last one's.
func (n *Node) SignRegistration(endpoint string, capabilities []string, region string) (api.RegisterRequest, error) {
	did, pub, err := n.identity()
	if err != nil {
		return api.RegisterRequest{}, err
	}
	caps := slices.Clone(capabilities)
	if caps == nil {
		caps = []string{}
	}
	req := api.RegisterRequest{DID: did, PublicKey: pub.Hex(), Endpoint: endpoint, Capabilities: caps, Region: region}
	var msg canonical.Message = canonical.Register{DID: did, PublicKey: pub.Base58(), Endpoint: endpoint, Capabilities: caps, Region: region}
	if !n.RegisterV1 {
		ts := max(n.Client.now().Unix(), n.lastRegisterTS+1)
		msg = canonical.RegisterV2{DID: did, PublicKey: pub.Base58(), Endpoint: endpoint, Capabilities: caps, Region: region, TS: ts}
		req.TS = &ts
	}
	sig, err := canonical.Sign(n.Key, n.Client.prefix, msg)
	if err != nil {
		return api.RegisterRequest{}, err
	}
	req.Signature = &sig
	if req.TS != nil {
		n.lastRegisterTS = *req.TS
	}
	return req, nil
}

// Heartbeat refreshes the node's last_seen (POST /api/v1/heartbeat). The node must have
// registered (else UNKNOWN_DID), and the client's clock must be within 300 s of the
// registry's (else STALE_TS).
func (n *Node) Heartbeat(ctx context.Context) (api.HeartbeatResult, error) {
	req, err := n.SignHeartbeat(n.Client.now().Unix())
	if err != nil {
		return api.HeartbeatResult{}, err
	}
	return n.Client.Heartbeat(ctx, req)
}

// SignHeartbeat returns the heartbeat at ts that Heartbeat sends, signed and not sent, for a
// caller that sends it some other way or later: the registry takes it while ts is within 300
// s of its clock and newer than the last ts it took from the node. It changes nothing in n,
// so calls may run concurrently.
func (n *Node) SignHeartbeat(ts int64) (api.HeartbeatRequest, error) {
	did, pub, err := n.identity()
	if err != nil {
		return api.HeartbeatRequest{}, err
	}
	sig, err := canonical.Sign(n.Key, n.Client.prefix, canonical.Heartbeat{DID: did, TS: ts})
	if err != nil {
		return api.HeartbeatRequest{}, err
	}
	pubHex := pub.Hex()
	return api.HeartbeatRequest{DID: did, TS: ts, Signature: sig, PublicKey: &pubHex}, nil
}

// InitiateOptions describe the binding a node asks for. Every field is optional.
type InitiateOptions struct {
	// SessionID is the binding_session_id; "" draws a random one. A caller-chosen id is
	// never retried after a failure that may have reached the registry, since the second
	// attempt could only get SESSION_EXISTS.
	SessionID string
	// DeviceSummary, OS and Region describe the node to the operator ("" leaves them out).
	DeviceSummary, OS, Region string
	// TaskTypes are the task types the node asks to be bound for.
	TaskTypes []string
	// SingleLimit and DailyLimit cap what the operator may grant; nil asks for no cap.
	SingleLimit, DailyLimit *float64
	// TTL is how long the session stays open, at most 600 s; 0 means 600 s.
	TTL time.Duration
	// Nonce is the session's nonce; "" draws a random one.
	Nonce string
}

// MaxSessionTTL is the longest a binding session may stay open.
const MaxSessionTTL = binding.MaxSessionTTL

// Initiate opens a binding session with the node's signed description (message 6). Show the
// result's short code and the node's fingerprint to the person; the code is returned once
// and is a secret until the operator has used it.
func (n *Node) Initiate(ctx context.Context, o InitiateOptions) (api.InitiateResult, error) {
	did, pub, err := n.identity()
	if err != nil {
		return api.InitiateResult{}, err
	}
	ttl := o.TTL
	if ttl == 0 {
		ttl = MaxSessionTTL
	}
	tasks := slices.Clone(o.TaskTypes)
	if tasks == nil {
		tasks = []string{}
	}
	var out api.InitiateResult
	attempt := func() error {
		id, nonce := o.SessionID, o.Nonce
		var err error
		if id == "" {
			if id, err = n.Client.randomHex(16); err != nil {
				return err
			}
			id = "bs-" + id
		}
		if nonce == "" {
			if nonce, err = n.Client.randomHex(16); err != nil {
				return err
			}
		}
		now := n.Client.now()
		req := binding.InitiateRequest{BindingSession: canonical.BindingSession{
			BindingSessionID: id, NodeDID: did, NodePublicKey: pub.Base58(),
			DeviceSummary: o.DeviceSummary, OS: o.OS, Region: o.Region,
			RequestedTaskTypes: tasks, RequestedSingleLimit: o.SingleLimit, RequestedDailyLimit: o.DailyLimit,
			Nonce: nonce, CreatedAt: canonical.FormatTime(now), ExpiresAt: canonical.FormatTime(now.Add(ttl)),
		}}
		if req.NodeSignature, err = canonical.Sign(n.Key, n.Client.prefix, req.BindingSession); err != nil {
			return err
		}
		return n.Client.callOnce(ctx, request{method: http.MethodPost, path: "/v1/bindings/initiate", body: req}, &out)
	}
	// Each retry draws a new id: an attempt whose answer was lost may have opened its
	// session, and its id can never be used again.
	if o.SessionID != "" {
		err = attempt()
	} else {
		err = n.Client.retrying(ctx, attempt)
	}
	return out, err
}

// Pending returns the authorizations awaiting the node's answer (message 5).
func (n *Node) Pending(ctx context.Context) ([]api.PendingAuthorization, error) {
	did, pub, err := n.identity()
	if err != nil {
		return nil, err
	}
	ts := n.Client.now().Unix()
	sig, err := canonical.Sign(n.Key, n.Client.prefix, canonical.Poll{NodeDID: did, TS: ts})
	if err != nil {
		return nil, err
	}
	res, err := n.Client.PendingAuthorizations(ctx, api.PendingRequest{NodeDID: did, NodePublicKey: pub.Base58(), TS: ts, Signature: sig})
	return res.Pending, err
}

// WaitForAuthorization polls every interval until an authorization for the session arrives,
// and returns it. It stops with a [*SessionEndedError] when the session reaches a terminal
// state instead (expired, rejected or cancelled), and with ctx's error when ctx is done.
// Errors of a single poll that the client retries (network, 429, 5xx) are not fatal: the
// next poll tries again.
func (n *Node) WaitForAuthorization(ctx context.Context, sessionID string, interval time.Duration) (api.PendingAuthorization, error) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	for {
		pending, err := n.Pending(ctx)
		if err != nil && (ctx.Err() != nil || !retryable(ctx, err)) {
			return api.PendingAuthorization{}, err
		}
		for _, p := range pending {
			if p.BindingSessionID == sessionID {
				return p, nil
			}
		}
		st, err := n.Client.Status(ctx, sessionID)
		switch {
		case err == nil && terminal(st.State):
			return api.PendingAuthorization{}, &SessionEndedError{BindingSessionID: sessionID, State: st.State}
		case err != nil && (ctx.Err() != nil || !retryable(ctx, err)):
			return api.PendingAuthorization{}, err
		}
		if err := pause.For(ctx, interval); err != nil {
			return api.PendingAuthorization{}, err
		}
	}
}

// terminal reports whether a state never moves again. An unknown name counts as terminal:
// waiting on a state the client cannot read would never end.
func terminal(state string) bool {
	s, err := binding.ParseState(state)
	return err != nil || s.Terminal()
}

// VerifyPending checks an authorization before the node answers it: the credential's
// operator DID derives from its root key, the root key signed it and it grants nodes.bind;
// the authorization names this session, this node and that operator, and the device key
// signed it. A node should accept nothing that fails here, whatever the registry says.
//
// Validity windows are left to the registry, whose clock is the reference: they allow 5 s of
// skew, less than two machines' clocks may differ.
func (n *Node) VerifyPending(p api.PendingAuthorization) error {
	_, pub, err := n.identity()
	if err != nil {
		return err
	}
	dc, az := p.DeviceCredential, p.AuthorizationCredential
	_, root, err := didkey.CheckOperator(dc.OperatorDID, dc.OperatorRootPublicKey)
	if err != nil {
		return localError(proto.DCIDBinding, "the device credential's operator DID does not derive from its root key")
	}
	if err := canonical.Verify(root, n.Client.prefix, dc.DeviceCredential, dc.Signature); err != nil {
		return localError(proto.DCBadSignature, "the device credential is not signed by its root key")
	}
	if !slices.Contains(dc.Permissions, binding.PermissionBind) {
		return localError(proto.PermissionDenied, "the device credential does not grant "+binding.PermissionBind)
	}
	d, err := didkey.Parse(az.NodeDID)
	switch {
	case err != nil || !d.Matches(pub):
		return localError(proto.BadRequest, "the authorization names another node")
	case az.BindingSessionID != p.BindingSessionID:
		return localError(proto.BadRequest, "the authorization names another binding session")
	case az.OperatorDID != dc.OperatorDID || p.OperatorDID != dc.OperatorDID:
		return localError(proto.BadRequest, "the authorization and the device credential name different operators")
	}
	device, err := didkey.DecodeKey(dc.DevicePublicKey)
	if err != nil {
		return localError(proto.DCIDBinding, "the device credential's device key does not decode")
	}
	if err := canonical.Verify(device, n.Client.prefix, az.Authorization, az.Signature); err != nil {
		return localError(proto.BadSignature, "the authorization is not signed by the credential's device key")
	}
	return nil
}

// Accept verifies the authorization ([Node.VerifyPending]) and accepts exactly it: the
// acceptance (message 8) carries the digest of its canonical bytes. The registry then
// re-verifies all four signatures and the session becomes ACTIVE.
func (n *Node) Accept(ctx context.Context, p api.PendingAuthorization) (api.AcceptResult, error) {
	if err := n.VerifyPending(p); err != nil {
		return api.AcceptResult{}, err
	}
	acc, err := n.acceptance(p, true)
	if err != nil {
		return api.AcceptResult{}, err
	}
	return n.Client.Accept(ctx, p.BindingSessionID, acc)
}

// Reject refuses the authorization (REJECTED_BY_NODE). Refusing is always safe, so the
// authorization is not verified first.
func (n *Node) Reject(ctx context.Context, p api.PendingAuthorization) (api.StateResult, error) {
	acc, err := n.acceptance(p, false)
	if err != nil {
		return api.StateResult{}, err
	}
	return n.Client.NodeReject(ctx, p.BindingSessionID, acc)
}

func (n *Node) acceptance(p api.PendingAuthorization, accepted bool) (binding.Acceptance, error) {
	did, _, err := n.identity()
	if err != nil {
		return binding.Acceptance{}, err
	}
	digest, err := p.AuthorizationCredential.Digest(n.Client.prefix)
	if err != nil {
		return binding.Acceptance{}, err
	}
	m := canonical.Acceptance{
		BindingSessionID: p.BindingSessionID, NodeDID: did, OperatorDID: p.AuthorizationCredential.OperatorDID,
		AuthorizationDigest: digest, Accepted: accepted, IssuedAt: canonical.FormatTime(n.Client.now()),
	}
	sig, err := canonical.Sign(n.Key, n.Client.prefix, m)
	if err != nil {
		return binding.Acceptance{}, err
	}
	return binding.Acceptance{Acceptance: m, Signature: sig}, nil
}

// Cancel cancels one of the node's binding sessions (message 9). Any state but a terminal one
// can be cancelled.
func (n *Node) Cancel(ctx context.Context, sessionID string) (api.StateResult, error) {
	req, err := n.sessionRequest(sessionID, false)
	if err != nil {
		return api.StateResult{}, err
	}
	return n.Client.NodeCancel(ctx, sessionID, req)
}

// sessionRequest signs, with the node key and the client's clock, message 9 (cancel) or, with
// unbind, message 12 about one of the node's binding sessions; the two have the same fields,
// and so have the bodies that carry them.
func (n *Node) sessionRequest(sessionID string, unbind bool) (api.NodeCancelRequest, error) {
	did, _, err := n.identity()
	if err != nil {
		return api.NodeCancelRequest{}, err
	}
	m := canonical.Cancel{BindingSessionID: sessionID, NodeDID: did, TS: n.Client.now().Unix()}
	var sig string
	if unbind {
		sig, err = canonical.Sign(n.Key, n.Client.prefix, canonical.Unbind(m))
	} else {
		sig, err = canonical.Sign(n.Key, n.Client.prefix, m)
	}
	if err != nil {
		return api.NodeCancelRequest{}, err
	}
	return api.NodeCancelRequest{NodeDID: did, TS: m.TS, Signature: sig}, nil
}

// publicKey checks that key is an Ed25519 private key and returns its public half.
func publicKey(key ed25519.PrivateKey) (didkey.PublicKey, error) {
	if len(key) != ed25519.PrivateKeySize {
		return didkey.PublicKey{}, localError(proto.BadRequest, "the private key is not an Ed25519 key")
	}
	return didkey.KeyFromEd25519(key.Public().(ed25519.PublicKey))
}
