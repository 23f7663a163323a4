package client

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// DefaultCredentialValidity is how long a DeviceCredential is valid unless told otherwise.
const DefaultCredentialValidity = 365 * 24 * time.Hour

// DefaultAuthorizationValidity is how long an AuthorizationCredential is valid unless told
// otherwise.
const DefaultAuthorizationValidity = 365 * 24 * time.Hour

// CredentialOptions shape a DeviceCredential. Every field is optional.
type CredentialOptions struct {
	// Prefix is the domain prefix; "" means "service". It must be the registry's.
	Prefix string
	// IssuedAt is the start of validity; zero means the time of the call.
	IssuedAt time.Time
	// Validity is the length of validity; 0 means DefaultCredentialValidity.
	Validity time.Duration
	// Permissions granted to the device; nil means just "nodes.bind", which binding needs.
	Permissions []string
	// CredentialID, DeviceID and RevocationID; "" derives each from the keys and IssuedAt,
	// so that issuing is a pure function of its inputs.
	CredentialID, DeviceID, RevocationID string
}

// OperatorDID returns the operator DID of a root key (did:svrp:o:<8 hex>).
func OperatorDID(root ed25519.PublicKey) (string, error) {
	k, err := didkey.KeyFromEd25519(root)
	if err != nil {
		return "", err
	}
	d, err := didkey.OperatorDID(k, didkey.FormShort)
	return d.String(), err
}

// IssueDeviceCredential signs, with the operator's root key, a DeviceCredential that lets the
// device key act for the operator (message 2). It needs no network: the root key can live on
// an offline machine and be used once. Keys are written in base58.
func IssueDeviceCredential(root ed25519.PrivateKey, device ed25519.PublicKey, o CredentialOptions) (authn.DeviceCredential, error) {
	rootPub, err := publicKey(root)
	if err != nil {
		return authn.DeviceCredential{}, err
	}
	devPub, err := didkey.KeyFromEd25519(device)
	if err != nil {
		return authn.DeviceCredential{}, err
	}
	op, _ := didkey.OperatorDID(rootPub, didkey.FormShort)
	prefix := o.Prefix
	if prefix == "" {
		prefix = canonical.DefaultPrefix
	}
	issued := o.IssuedAt
	if issued.IsZero() {
		issued = time.Now()
	}
	issued = issued.UTC().Truncate(time.Second)
	validity := o.Validity
	if validity <= 0 {
		validity = DefaultCredentialValidity
	}
	perms := slices.Clone(o.Permissions)
	if perms == nil {
		perms = []string{binding.PermissionBind}
	}
	m := canonical.DeviceCredential{
		CredentialID: o.CredentialID, OperatorDID: op.String(), OperatorRootPublicKey: rootPub.Base58(),
		DeviceID: o.DeviceID, DevicePublicKey: devPub.Base58(), Permissions: perms,
		IssuedAt: canonical.FormatTime(issued), ExpiresAt: canonical.FormatTime(issued.Add(validity)),
		RevocationID: o.RevocationID,
	}
	derive := func(label string) string {
		h := sha256.New()
		for _, s := range []string{label, m.OperatorRootPublicKey, m.DevicePublicKey, m.IssuedAt} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		return label + "-" + hex.EncodeToString(h.Sum(nil)[:12])
	}
	if m.CredentialID == "" {
		m.CredentialID = derive("dc")
	}
	if m.DeviceID == "" {
		m.DeviceID = "device-" + hex.EncodeToString(devPub[:])[:16]
	}
	if m.RevocationID == "" {
		m.RevocationID = derive("rev")
	}
	sig, err := canonical.Sign(root, prefix, m)
	if err != nil {
		return authn.DeviceCredential{}, err
	}
	return authn.DeviceCredential{DeviceCredential: m, Signature: sig}, nil
}

// Operator is a logged-in operator: a bearer session and the device key and credential that
// sign authorizations. Make one with [Client.Login]. A session lasts one hour and is never
// refreshed; after SESSION_EXPIRED, log in again.
type Operator struct {
	Client *Client
	// DID is the operator DID the registry logged in.
	DID string
	// Token is the bearer token. It is a secret: never print or log it.
	Token string `json:"-"`
	// ExpiresAt is when the session ends, by the client's clock.
	ExpiresAt time.Time
	// DeviceKey signs authorizations; Credential is the root key's word for it.
	DeviceKey  ed25519.PrivateKey `json:"-"`
	Credential authn.DeviceCredential
}

// String names the operator without the token or key, so an operator printed by mistake
// leaks nothing.
func (o Operator) String() string { return "svrp operator " + o.DID }

// GoString is String, for %#v.
func (o Operator) GoString() string { return o.String() }

// Login logs an operator in: a fresh challenge, signed by the device key (message 1), sent with
// the credential. On a failure that the protocol retries, the whole login is retried with a new
// challenge, since the registry consumes a challenge even when the login fails.
func (c *Client) Login(ctx context.Context, deviceKey ed25519.PrivateKey, dc authn.DeviceCredential) (*Operator, error) {
	pub, err := publicKey(deviceKey)
	if err != nil {
		return nil, err
	}
	if k, err := didkey.DecodeKey(dc.DevicePublicKey); err != nil || k != pub {
		return nil, localError(proto.BadSignature, "the device key is not the one the credential names")
	}
	var res api.LoginResult
	err = c.retrying(ctx, func() error {
		// One challenge per attempt: this loop is the retry, and a challenge is never reused.
		var ch api.ChallengeResult
		if err := c.callOnce(ctx, request{method: http.MethodPost, path: "/v1/auth/challenge"}, &ch); err != nil {
			return err
		}
		l := authn.Login{DeviceCredential: dc, Challenge: ch.Challenge, IssuedAt: canonical.FormatTime(c.now())}
		msg := canonical.Login{OperatorDID: dc.OperatorDID, DevicePublicKey: dc.DevicePublicKey, Challenge: l.Challenge, IssuedAt: l.IssuedAt}
		if l.Signature, err = canonical.Sign(deviceKey, c.prefix, msg); err != nil {
			return err
		}
		res, err = c.DeviceLogin(ctx, l)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Operator{
		Client: c, DID: res.OperatorDID, Token: res.SessionToken,
		ExpiresAt: c.now().Add(time.Duration(res.ExpiresIn) * time.Second),
		DeviceKey: deviceKey, Credential: dc,
	}, nil
}

// Resolve looks up the binding request a short code names (dashes, spaces and case do not
// matter) and moves it to PENDING_OPERATOR. Before authorizing, the person must compare the
// view's NodePublicKeyFingerprint with the one on the node's screen. Resolve checks that the
// fingerprint, key and DID shown agree, so what the person compares is what gets authorized.
func (o *Operator) Resolve(ctx context.Context, shortCode string) (api.ResolveView, error) {
	return o.resolve(ctx, api.ResolveRequest{ShortCode: shortCode})
}

// ResolveToken is Resolve with the binding token instead of the short code.
func (o *Operator) ResolveToken(ctx context.Context, token string) (api.ResolveView, error) {
	return o.resolve(ctx, api.ResolveRequest{BindingToken: token})
}

// ResolveNode is Resolve naming the node that shows the code, by its DID in any spelling
// (docs/protocol.md §10.9): the registry finds only a session of that node, and strangers
// failing resolves cannot spend the budget that lets this one through. Prefer it to Resolve
// whenever the node's DID is at hand; the node shows it beside the code.
func (o *Operator) ResolveNode(ctx context.Context, nodeDID, shortCode string) (api.ResolveView, error) {
	return o.resolve(ctx, api.ResolveRequest{ShortCode: shortCode, NodeDID: nodeDID})
}

// ResolveNodeToken is ResolveNode with the binding token instead of the short code.
func (o *Operator) ResolveNodeToken(ctx context.Context, nodeDID, token string) (api.ResolveView, error) {
	return o.resolve(ctx, api.ResolveRequest{BindingToken: token, NodeDID: nodeDID})
}

func (o *Operator) resolve(ctx context.Context, req api.ResolveRequest) (api.ResolveView, error) {
	var named didkey.DID
	if req.NodeDID != "" {
		d, err := didkey.Parse(req.NodeDID)
		if err != nil {
			return api.ResolveView{}, err
		}
		named = d
	}
	v, err := o.Client.Resolve(ctx, o.Token, req)
	if err != nil {
		return api.ResolveView{}, err
	}
	if err := CheckView(v); err != nil {
		return api.ResolveView{}, err
	}
	// A registry that ignores node_did (one from before it existed) could show another
	// node's request: the view's key must be the named node's.
	if req.NodeDID != "" {
		if k, err := didkey.DecodeKey(v.NodePublicKey); err != nil || !named.Matches(k) {
			return api.ResolveView{}, localError(proto.IDBindingFailed, "the registry showed the request of another node than the one named")
		}
	}
	if v.NodeSignature != "" {
		if err := VerifyDescription(v, o.Client.prefix); err != nil {
			return api.ResolveView{}, err
		}
	}
	return v, nil
}

// VerifyDescription checks the node's own signature over its description (message 6), as the
// resolve view carries it: what the operator is shown is then what the node key signed, not
// only what the registry says. A view without node_signature (a registry from before it was
// sent) cannot be checked and fails with BAD_SIGNATURE; [Operator.Resolve] checks it only
// when present.
func VerifyDescription(v api.ResolveView, prefix string) error {
	_, k, err := didkey.CheckNode(v.NodeDID, v.NodePublicKey)
	if err != nil {
		return err
	}
	if prefix == "" {
		prefix = canonical.DefaultPrefix
	}
	msg := canonical.BindingSession{
		BindingSessionID: v.BindingSessionID, NodeDID: v.NodeDID, NodePublicKey: k.Base58(),
		DeviceSummary: deref(v.DeviceSummary), OS: deref(v.OS), Region: deref(v.Region),
		RequestedTaskTypes:   v.Requested.TaskTypes,
		RequestedSingleLimit: v.Requested.SingleLimit, RequestedDailyLimit: v.Requested.DailyLimit,
		Nonce: v.Nonce, CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt,
	}
	if v.NodeSignature == "" || canonical.Verify(k, prefix, msg, v.NodeSignature) != nil {
		return localError(proto.BadSignature, "the node's signature does not cover the description shown")
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CheckView checks that a resolve view is self-consistent: the node DID derives from the key
// and the fingerprint is the key's.
func CheckView(v api.ResolveView) error {
	_, k, err := didkey.CheckNode(v.NodeDID, v.NodePublicKey)
	if err != nil {
		return err
	}
	if k.Fingerprint() != v.NodePublicKeyFingerprint {
		return localError(proto.IDBindingFailed, "the fingerprint shown is not the node key's")
	}
	return nil
}

// Terms are what an operator grants a node.
type Terms struct {
	// TaskTypes granted; each must be one the node requested.
	TaskTypes []string
	// SingleLimit and DailyLimit granted; where the node asked for a cap, the grant must be
	// set and no higher. nil grants no cap (only where the node asked for none).
	SingleLimit, DailyLimit *float64
	// Validity of the AuthorizationCredential; 0 means DefaultAuthorizationValidity.
	Validity time.Duration
	// RevocationID of the authorization; "" draws a random one.
	RevocationID string
}

// Requested returns exactly what the node asked for, the terms an operator grants by default.
func Requested(v api.ResolveView) Terms {
	return Terms{
		TaskTypes:   slices.Clone(v.Requested.TaskTypes),
		SingleLimit: v.Requested.SingleLimit,
		DailyLimit:  v.Requested.DailyLimit,
	}
}

// Authorize signs an AuthorizationCredential for the resolved session with the device key
// (message 7) and sends it with the DeviceCredential: PENDING_OPERATOR →
// PENDING_NODE_ACCEPTANCE. The node then sees it when it polls, and must accept.
func (o *Operator) Authorize(ctx context.Context, v api.ResolveView, t Terms) (api.StateResult, error) {
	if err := CheckView(v); err != nil {
		return api.StateResult{}, err
	}
	if o.DID != o.Credential.OperatorDID {
		return api.StateResult{}, localError(proto.PermissionDenied, "the credential is not the logged-in operator's")
	}
	rev := t.RevocationID
	if rev == "" {
		r, err := o.Client.randomHex(16)
		if err != nil {
			return api.StateResult{}, err
		}
		rev = "rev-" + r
	}
	validity := t.Validity
	if validity <= 0 {
		validity = DefaultAuthorizationValidity
	}
	tasks := slices.Clone(t.TaskTypes)
	if tasks == nil {
		tasks = []string{}
	}
	now := o.Client.now()
	m := canonical.Authorization{
		BindingSessionID: v.BindingSessionID, NodeDID: v.NodeDID, OperatorDID: o.DID,
		TaskTypes: tasks, SingleLimit: t.SingleLimit, DailyLimit: t.DailyLimit,
		RevocationID: rev, IssuedAt: canonical.FormatTime(now), ExpiresAt: canonical.FormatTime(now.Add(validity)),
	}
	sig, err := canonical.Sign(o.DeviceKey, o.Client.prefix, m)
	if err != nil {
		return api.StateResult{}, err
	}
	return o.Client.Authorize(ctx, o.Token, api.AuthorizeRequest{
		BindingSessionID:        v.BindingSessionID,
		DeviceCredential:        o.Credential,
		AuthorizationCredential: binding.AuthorizationCredential{Authorization: m, Signature: sig},
	})
}

// Reject refuses a resolved session (PENDING_OPERATOR → REJECTED_BY_OPERATOR).
func (o *Operator) Reject(ctx context.Context, sessionID string) (api.StateResult, error) {
	return o.Client.OperatorReject(ctx, o.Token, sessionID)
}

// Cancel cancels a session the operator resolved, in any state but a terminal one.
func (o *Operator) Cancel(ctx context.Context, sessionID string) (api.StateResult, error) {
	return o.Client.OperatorCancel(ctx, o.Token, sessionID)
}

// Nodes lists the nodes bound to the operator. A node is online when the registry saw it
// within window; window ≤ 0 means 10 minutes.
func (o *Operator) Nodes(ctx context.Context, window time.Duration) (api.OperatorNodes, error) {
	if window <= 0 {
		window = DefaultOnlineWindow
	}
	return o.Client.OperatorNodes(ctx, o.Token, window)
}

// Credits returns the raw credits envelope. Its amounts are placeholders unless Source is
// "ledger"; never show one without the envelope's disclaimer, and never add the three
// buckets up.
func (o *Operator) Credits(ctx context.Context) (api.Credits, error) {
	return o.Client.OperatorCredits(ctx, o.Token)
}

// Balance returns the credits view only when a ledger stands behind it (Source "ledger");
// otherwise it refuses with a [*NotYetWiredError] that carries the level and the raw
// envelope.
func (o *Operator) Balance(ctx context.Context) (api.Credits, error) {
	c, err := o.Credits(ctx)
	if err != nil {
		return api.Credits{}, err
	}
	if c.Source != SourceLedger {
		return api.Credits{}, &NotYetWiredError{Level: levelOf(c.Source), Envelope: c}
	}
	return c, nil
}

// Evidence returns the evidence view. While its source is not_yet_wired an empty list means
// unknown, not that nothing was contributed.
func (o *Operator) Evidence(ctx context.Context) (api.Evidence, error) {
	return o.Client.OperatorEvidence(ctx, o.Token)
}

// Status returns a binding session's state; it needs no session.
func (o *Operator) Status(ctx context.Context, sessionID string) (api.Status, error) {
	return o.Client.Status(ctx, sessionID)
}
