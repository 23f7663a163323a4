package registry_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// epoch is the fake clock's start: every test runs at a fixed, known time.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the test and the service.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness is a registry served over real HTTP on a real Badger store in a temporary
// directory.
type harness struct {
	t     *testing.T
	srv   *httptest.Server
	svc   *registry.Service
	st    store.Store
	clock *clock
	dir   string
}

type harnessOption func(*registry.Config)

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	return startHarness(t, st, dir, &clock{now: epoch}, opts...)
}

func startHarness(t *testing.T, st store.Store, dir string, c *clock, opts ...harnessOption) *harness {
	t.Helper()
	cfg := registry.Config{Store: st, Clock: c.Now}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, svc: svc, st: st, clock: c, dir: dir}
	h.srv = httptest.NewServer(registry.NewHandler(svc))
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	if h.srv != nil {
		h.srv.Close()
		h.srv = nil
		h.st.Close()
	}
}

// do sends a request and returns the status and body. body may be nil, a []byte or string
// sent as is, or a value encoded as JSON.
func (h *harness) do(method, path string, body any, bearer string) (int, []byte) {
	h.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = bytes.NewReader([]byte(b))
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		r = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// ok sends a request that must answer 200 and decodes the answer into out (if not nil).
func (h *harness) ok(method, path string, body any, bearer string, out any) {
	h.t.Helper()
	status, raw := h.do(method, path, body, bearer)
	if status != http.StatusOK {
		h.t.Fatalf("%s %s: status %d, body %s", method, path, status, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
}

// fails sends a request that must fail with status and code.
func (h *harness) fails(method, path string, body any, bearer string, status int, code string) []byte {
	h.t.Helper()
	got, raw := h.do(method, path, body, bearer)
	var e registry.ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil {
		h.t.Fatalf("%s %s: want %d %s, got %d %s", method, path, status, code, got, raw)
	}
	if got != status || e.Code != code {
		h.t.Fatalf("%s %s: want %d %s, got %d %s", method, path, status, code, got, raw)
	}
	return raw
}

func (h *harness) now() time.Time { return h.clock.Now() }

// key is a deterministic Ed25519 key for a test, named by label.
func key(t *testing.T, label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(t.Name() + "/" + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

func pub(priv ed25519.PrivateKey) didkey.PublicKey {
	k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	return k
}

func sign(t *testing.T, priv ed25519.PrivateKey, m canonical.Message) string {
	t.Helper()
	sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// node is a test node: its key and its short DID.
type node struct {
	priv ed25519.PrivateKey
	key  didkey.PublicKey
	did  string
}

func newNode(t *testing.T, label string) node {
	priv := key(t, label)
	k := pub(priv)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	return node{priv: priv, key: k, did: d.String()}
}

func (n node) fullDID() string {
	d, _ := didkey.NodeDID(n.key, didkey.FormFull)
	return d.String()
}

func (n node) registration(t *testing.T, endpoint string) registry.RegisterRequest {
	req := registry.RegisterRequest{
		DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint,
		Capabilities: []string{"inference"}, Region: "eu-west",
	}
	sig := sign(t, n.priv, canonical.Register{DID: req.DID, PublicKey: n.key.Base58(), Endpoint: req.Endpoint, Capabilities: req.Capabilities, Region: req.Region})
	req.Signature = &sig
	return req
}

func (n node) heartbeat(t *testing.T, did string, ts time.Time) registry.HeartbeatRequest {
	return registry.HeartbeatRequest{DID: did, TS: ts.Unix(), Signature: sign(t, n.priv, canonical.Heartbeat{DID: did, TS: ts.Unix()})}
}

func (n node) initiate(t *testing.T, id string, now time.Time, single, daily *float64) binding.InitiateRequest {
	req := binding.InitiateRequest{BindingSession: canonical.BindingSession{
		BindingSessionID: id, NodeDID: n.did, NodePublicKey: n.key.Base58(),
		DeviceSummary: "8 vCPU", OS: "linux", Region: "eu-west",
		RequestedTaskTypes:   []string{"inference", "embedding"},
		RequestedSingleLimit: single, RequestedDailyLimit: daily,
		Nonce: "nonce-" + id, CreatedAt: canonical.FormatTime(now), ExpiresAt: canonical.FormatTime(now.Add(10 * time.Minute)),
	}}
	req.NodeSignature = sign(t, n.priv, req.BindingSession)
	return req
}

func (n node) poll(t *testing.T, ts time.Time) registry.PendingRequest {
	return registry.PendingRequest{
		NodeDID: n.did, NodePublicKey: n.key.Base58(), TS: ts.Unix(),
		Signature: sign(t, n.priv, canonical.Poll{NodeDID: n.did, TS: ts.Unix()}),
	}
}

func (n node) acceptance(t *testing.T, p registry.PendingAuthorization, accepted bool, now time.Time) registry.AcceptanceRequest {
	digest, err := p.AuthorizationCredential.Authorization.Digest(canonical.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	acc := binding.Acceptance{Acceptance: canonical.Acceptance{
		BindingSessionID: p.BindingSessionID, NodeDID: n.did, OperatorDID: p.OperatorDID,
		AuthorizationDigest: digest, Accepted: accepted, IssuedAt: canonical.FormatTime(now),
	}}
	acc.Signature = sign(t, n.priv, acc.Acceptance)
	return registry.AcceptanceRequest{Acceptance: acc}
}

// operator is a test operator: a root key, a device key and the DeviceCredential tying them.
type operator struct {
	root, device ed25519.PrivateKey
	did          string
	cred         authn.DeviceCredential
}

func newOperator(t *testing.T, label string, now time.Time, permissions ...string) operator {
	root, device := key(t, label+"/root"), key(t, label+"/device")
	d, _ := didkey.OperatorDID(pub(root), didkey.FormShort)
	cred := authn.DeviceCredential{DeviceCredential: canonical.DeviceCredential{
		CredentialID: "cred-" + label, OperatorDID: d.String(), OperatorRootPublicKey: pub(root).Base58(),
		DeviceID: "laptop", DevicePublicKey: pub(device).Base58(), Permissions: permissions,
		IssuedAt: canonical.FormatTime(now.Add(-time.Hour)), ExpiresAt: canonical.FormatTime(now.Add(365 * 24 * time.Hour)),
		RevocationID: "rev-" + label,
	}}
	cred.Signature = sign(t, root, cred.DeviceCredential)
	return operator{root: root, device: device, did: d.String(), cred: cred}
}

// login runs challenge and device-login and returns the session token.
func (o operator) login(h *harness) string {
	h.t.Helper()
	var ch registry.ChallengeResult
	h.ok("POST", "/v1/auth/challenge", nil, "", &ch)
	var res registry.LoginResult
	h.ok("POST", "/v1/auth/device-login", o.loginRequest(h.t, ch.Challenge, h.now()), "", &res)
	return res.SessionToken
}

func (o operator) loginRequest(t *testing.T, challenge string, now time.Time) authn.Login {
	issued := canonical.FormatTime(now)
	return authn.Login{
		DeviceCredential: o.cred, Challenge: challenge, IssuedAt: issued,
		Signature: sign(t, o.device, canonical.Login{OperatorDID: o.did, DevicePublicKey: o.cred.DevicePublicKey, Challenge: challenge, IssuedAt: issued}),
	}
}

func (o operator) authorize(t *testing.T, v registry.ResolveView, now time.Time, single, daily *float64) registry.AuthorizeRequest {
	az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
		BindingSessionID: v.BindingSessionID, NodeDID: v.NodeDID, OperatorDID: o.did,
		TaskTypes: []string{"inference"}, SingleLimit: single, DailyLimit: daily,
		RevocationID: "authz-" + v.BindingSessionID, IssuedAt: canonical.FormatTime(now),
		ExpiresAt: canonical.FormatTime(now.Add(time.Hour)),
	}}
	az.Signature = sign(t, o.device, az.Authorization)
	return registry.AuthorizeRequest{BindingSessionID: v.BindingSessionID, DeviceCredential: o.cred, AuthorizationCredential: az}
}

func num(v float64) *float64 { return &v }
