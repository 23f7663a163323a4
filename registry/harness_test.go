package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/postgres"
)

// epoch is the fake clock's start: every test runs at a fixed, known time.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// harness is a registry served over real HTTP on a real Badger store in a temporary
// directory.
type harness struct {
	t     *testing.T
	srv   *httptest.Server
	svc   *registry.Service
	st    store.Store
	clock *testkit.Clock
	dir   string
	// strictAPI holds every exchange to the OpenAPI document as written (see checkExchange).
	strictAPI bool
}

type harnessOption func(*registry.Config)

// newHarness serves the registry as svrpd does: Badger with the node table in memory in
// front of it.
func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	return startHarness(t, st, dir, testkit.NewClock(epoch), opts...)
}

// pgHarnesses is what makes newHarness serve on PostgreSQL: the tests that asked for it
// (servePostgres), by name, so that their subtests, which may run side by side with other
// tests, each find out from their own; a schema of its own per harness directory, so that a
// restart reopens the same one; and the stores opened on it.
var pgHarnesses struct {
	mu      sync.Mutex
	tests   map[string]bool
	schemas map[string]string
	stores  map[store.Store]bool
}

// servePostgres makes the harnesses of t and its subtests serve on PostgreSQL, as svrpd does
// with --postgres; without SVRPD_TEST_POSTGRES the test is skipped.
func servePostgres(t *testing.T) {
	t.Helper()
	pgtest.URL(t)
	name := t.Name()
	pgHarnesses.mu.Lock()
	defer pgHarnesses.mu.Unlock()
	if pgHarnesses.tests == nil {
		pgHarnesses.tests = map[string]bool{}
		pgHarnesses.schemas = map[string]string{}
		pgHarnesses.stores = map[store.Store]bool{}
	}
	pgHarnesses.tests[name] = true
	t.Cleanup(func() {
		pgHarnesses.mu.Lock()
		defer pgHarnesses.mu.Unlock()
		delete(pgHarnesses.tests, name)
	})
}

// onPostgres reports whether t, or a test it is a subtest of, serves on PostgreSQL.
func onPostgres(t testing.TB) bool {
	name := t.Name()
	pgHarnesses.mu.Lock()
	defer pgHarnesses.mu.Unlock()
	for name != "" {
		if pgHarnesses.tests[name] {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return false
}

// storeInChallenges reports whether st was opened on PostgreSQL by openStore, where the
// registry keeps its challenges in the store as svrpd does.
func storeInChallenges(st store.Store) bool {
	pgHarnesses.mu.Lock()
	defer pgHarnesses.mu.Unlock()
	return pgHarnesses.stores[st]
}

// openStore opens Badger in dir behind the node cache, or when t serves on PostgreSQL the
// schema of dir.
func openStore(t *testing.T, dir string) store.Store {
	t.Helper()
	if onPostgres(t) {
		return openPostgres(t, dir)
	}
	st, err := badger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := store.WithNodeCache(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return cached
}

// openPostgres opens the schema of dir, created on first use and dropped with the test that
// created it, behind the node cache.
func openPostgres(t *testing.T, dir string) store.Store {
	t.Helper()
	pgHarnesses.mu.Lock()
	u, ok := pgHarnesses.schemas[dir]
	pgHarnesses.mu.Unlock()
	if !ok {
		u = pgtest.Schema(t)
		pgHarnesses.mu.Lock()
		pgHarnesses.schemas[dir] = u
		pgHarnesses.mu.Unlock()
		t.Cleanup(func() {
			pgHarnesses.mu.Lock()
			defer pgHarnesses.mu.Unlock()
			delete(pgHarnesses.schemas, dir)
		})
	}
	p, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	cached, err := store.WithNodeCache(context.Background(), p)
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	pgHarnesses.mu.Lock()
	pgHarnesses.stores[cached] = true
	pgHarnesses.mu.Unlock()
	return cached
}

// newPlainHarness serves the registry on Badger alone, where every heartbeat is a durable
// write.
func newPlainHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := badger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return startHarness(t, st, dir, testkit.NewClock(epoch), opts...)
}

func startHarness(t *testing.T, st store.Store, dir string, c *testkit.Clock, opts ...harnessOption) *harness {
	t.Helper()
	// The hostile and login tables send thousands of failing logins and malformed requests
	// from one address; those budgets have their own tests (budgets_test.go,
	// internal/abuse).
	cfg := registry.Config{Store: st, Clock: c.Now, ChallengesInStore: storeInChallenges(st), Limits: limits.Limits{
		LoginFailureAddressLimit: 1 << 30, LoginFailureOperatorLimit: 1 << 30, MalformedAddressLimit: 1 << 30}}
	for _, o := range opts {
		o(&cfg)
	}
	svc, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, svc: svc, st: st, clock: c, dir: dir}
	h.srv = httptest.NewServer(httpapi.New(svc))
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	if h.srv != nil {
		h.srv.Close()
		h.srv = nil
		h.st.Close()
		pgHarnesses.mu.Lock()
		delete(pgHarnesses.stores, h.st)
		pgHarnesses.mu.Unlock()
	}
}

// do sends a request and returns the status and body. body may be nil, a []byte or string
// sent as is, or a value encoded as JSON.
func (h *harness) do(method, path string, body any, bearer string) (int, []byte) {
	h.t.Helper()
	if bearer != "" {
		bearer = "Bearer " + bearer
	}
	return h.request(method, path, body, bearer)
}

// request is do with the Authorization header given whole (none when auth is empty), for
// headers that a bearer token alone cannot write.
func (h *harness) request(method, path string, body any, auth string) (int, []byte) {
	h.t.Helper()
	var sent []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		sent = b
	case string:
		sent = []byte(b)
	default:
		sent = mustJSON(h.t, b)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, r)
	if err != nil {
		h.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, out := testkit.Do(h.t, h.srv.Client(), req)
	checkExchange(h.t, h.strictAPI, req, sent, resp, out)
	checkErrorText(h.t, method+" "+path, resp.StatusCode, out)
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
	var e api.ErrorBody
	if err := json.Unmarshal(raw, &e); err != nil {
		h.t.Fatalf("%s %s: want %d %s, got %d %s", method, path, status, code, got, raw)
	}
	if got != status || e.Code != code {
		h.t.Fatalf("%s %s: want %d %s, got %d %s", method, path, status, code, got, raw)
	}
	return raw
}

func (h *harness) now() time.Time { return h.clock.Now() }

func pub(priv ed25519.PrivateKey) didkey.PublicKey {
	k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	return k
}

func sign(t testing.TB, priv ed25519.PrivateKey, m canonical.Message) string {
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

func newNode(t testing.TB, label string) node {
	priv := testkit.LabelKey(t, label)
	k := pub(priv)
	d, _ := didkey.NodeDID(k, didkey.FormShort)
	return node{priv: priv, key: k, did: d.String()}
}

func (n node) fullDID() string {
	d, _ := didkey.NodeDID(n.key, didkey.FormFull)
	return d.String()
}

func (n node) registration(t testing.TB, endpoint string) api.RegisterRequest {
	req := api.RegisterRequest{
		DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint,
		Capabilities: []string{"inference"}, Region: "eu-west",
	}
	sig := sign(t, n.priv, canonical.Register{DID: req.DID, PublicKey: n.key.Base58(), Endpoint: req.Endpoint, Capabilities: req.Capabilities, Region: req.Region})
	req.Signature = &sig
	return req
}

func (n node) heartbeat(t testing.TB, did string, ts time.Time) api.HeartbeatRequest {
	return api.HeartbeatRequest{DID: did, TS: ts.Unix(), Signature: sign(t, n.priv, canonical.Heartbeat{DID: did, TS: ts.Unix()})}
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

func (n node) poll(t *testing.T, ts time.Time) api.PendingRequest {
	return api.PendingRequest{
		NodeDID: n.did, NodePublicKey: n.key.Base58(), TS: ts.Unix(),
		Signature: sign(t, n.priv, canonical.Poll{NodeDID: n.did, TS: ts.Unix()}),
	}
}

func (n node) acceptance(t *testing.T, p api.PendingAuthorization, accepted bool, now time.Time) api.AcceptanceRequest {
	digest, err := p.AuthorizationCredential.Authorization.Digest(canonical.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	acc := binding.Acceptance{Acceptance: canonical.Acceptance{
		BindingSessionID: p.BindingSessionID, NodeDID: n.did, OperatorDID: p.OperatorDID,
		AuthorizationDigest: digest, Accepted: accepted, IssuedAt: canonical.FormatTime(now),
	}}
	acc.Signature = sign(t, n.priv, acc.Acceptance)
	return api.AcceptanceRequest{Acceptance: acc}
}

// operator is a test operator: a root key, a device key and the DeviceCredential tying them.
type operator struct {
	root, device ed25519.PrivateKey
	did          string
	cred         authn.DeviceCredential
}

func newOperator(t testing.TB, label string, now time.Time, permissions ...string) operator {
	root, device := testkit.LabelKey(t, label+"/root"), testkit.LabelKey(t, label+"/device")
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

// newLoggedIn serves a harness in which operator "op", who may bind nodes, has logged in with
// the returned token.
func newLoggedIn(t *testing.T) (*harness, operator, string) {
	t.Helper()
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	return h, op, op.login(h)
}

// login runs challenge and device-login and returns the session token.
func (o operator) login(h *harness) string {
	h.t.Helper()
	var res api.LoginResult
	h.ok("POST", "/v1/auth/device-login", o.loginRequest(h.t, h.challenge(), h.now()), "", &res)
	return res.SessionToken
}

// challenge fetches a fresh login challenge.
func (h *harness) challenge() string {
	h.t.Helper()
	var ch api.ChallengeResult
	h.ok("POST", "/v1/auth/challenge", nil, "", &ch)
	return ch.Challenge
}

func (o operator) loginRequest(t testing.TB, challenge string, now time.Time) authn.Login {
	issued := canonical.FormatTime(now)
	return authn.Login{
		DeviceCredential: o.cred, Challenge: challenge, IssuedAt: issued,
		Signature: sign(t, o.device, canonical.Login{OperatorDID: o.did, DevicePublicKey: o.cred.DevicePublicKey, Challenge: challenge, IssuedAt: issued}),
	}
}

func (o operator) authorize(t *testing.T, v api.ResolveView, now time.Time, single, daily *float64) api.AuthorizeRequest {
	az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
		BindingSessionID: v.BindingSessionID, NodeDID: v.NodeDID, OperatorDID: o.did,
		TaskTypes: []string{"inference"}, SingleLimit: single, DailyLimit: daily,
		RevocationID: "authz-" + v.BindingSessionID, IssuedAt: canonical.FormatTime(now),
		ExpiresAt: canonical.FormatTime(now.Add(time.Hour)),
	}}
	az.Signature = sign(t, o.device, az.Authorization)
	return api.AuthorizeRequest{BindingSessionID: v.BindingSessionID, DeviceCredential: o.cred, AuthorizationCredential: az}
}

func num(v float64) *float64 { return &v }

// strictSignatures turns grace mode off, as the daemon's --strict-signatures does.
func strictSignatures() harnessOption {
	return func(c *registry.Config) { c.StrictSignatures = true }
}

func resolveAddressLimit(n int) harnessOption {
	return func(c *registry.Config) { c.Limits.ResolveAddressLimit = n }
}

func registerAddressLimit(n int) harnessOption {
	return func(c *registry.Config) { c.Limits.RegisterAddressLimit = n }
}

// withRand gives the service a random source the test controls, so that a test can know a
// short code before the registry issues it.
func withRand(r io.Reader) harnessOption {
	return func(c *registry.Config) { c.Rand = r }
}

// swapRand is a random source whose next bytes a test can script; by default it reads
// crypto/rand.
type swapRand struct {
	mu sync.Mutex
	r  io.Reader
}

func (s *swapRand) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r == nil {
		return crand.Read(p)
	}
	return s.r.Read(p)
}

// next makes b the next bytes read, then crypto/rand again.
func (s *swapRand) next(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r = io.MultiReader(bytes.NewReader(b), crand.Reader)
}

// in returns the same registry reporting to t, for subtests that share one registry.
func (h *harness) in(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// restart stops the service, closes its Badger store, and starts a new service on a store
// reopened from the same directory, with the same clock.
func (h *harness) restart(opts ...harnessOption) *harness {
	h.t.Helper()
	h.close()
	st := openStore(h.t, h.dir)
	return startHarness(h.t, st, h.dir, h.clock, opts...)
}

// readStatus reads a binding session's status, which must answer 200.
func (h *harness) readStatus(id string) api.Status {
	h.t.Helper()
	var st api.Status
	h.ok("GET", "/v1/bindings/"+id+"/status", nil, "", &st)
	return st
}

// wantState checks the state GET /status reports.
func (h *harness) wantState(id, state string) {
	h.t.Helper()
	if got := h.readStatus(id).State; got != state {
		h.t.Fatalf("session %s: state %s, want %s", id, got, state)
	}
}

// flow is a binding session driven through the handshake by harness.drive.
type flow struct {
	id   string
	ini  api.InitiateResult
	view api.ResolveView
	pend api.PendingAuthorization
}

// drive initiates a session of n with id and runs the handshake with op (logged in as token)
// until the session is in state to: INITIATED, PENDING_OPERATOR, PENDING_NODE_ACCEPTANCE,
// ACTIVE, CANCELLED, REJECTED_BY_OPERATOR or REJECTED_BY_NODE. The node requests a single
// limit of 10 and no daily limit; the operator grants 5 and 50 for "inference".
func (h *harness) drive(n node, op operator, token, id, to string) flow {
	h.t.Helper()
	t := h.t
	s := flow{id: id}
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, id, h.now(), num(10), nil), "", &s.ini)
	switch to {
	case "INITIATED":
		return s
	case "CANCELLED":
		h.ok("POST", "/v1/bindings/"+id+"/cancel", n.cancelRequest(t, id, n.did, h.now()), "", nil)
		return s
	}
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: s.ini.ShortCode}, token, &s.view)
	switch to {
	case "PENDING_OPERATOR":
		return s
	case "REJECTED_BY_OPERATOR":
		h.ok("POST", "/v1/bindings/"+id+"/reject", nil, token, nil)
		return s
	}
	h.ok("POST", "/v1/bindings/authorize", op.authorize(t, s.view, h.now(), num(5), num(50)), token, nil)
	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	for _, p := range pend.Pending {
		if p.BindingSessionID == id {
			s.pend = p
		}
	}
	if s.pend.BindingSessionID != id {
		t.Fatalf("session %s is not among the node's pending authorizations: %+v", id, pend)
	}
	switch to {
	case "PENDING_NODE_ACCEPTANCE":
		return s
	case "ACTIVE":
		h.ok("POST", "/v1/node/bindings/"+id+"/accept", n.acceptance(t, s.pend, true, h.now()), "", nil)
		return s
	case "REJECTED_BY_NODE":
		h.ok("POST", "/v1/node/bindings/"+id+"/reject", n.acceptance(t, s.pend, false, h.now()), "", nil)
		return s
	}
	t.Fatalf("drive: unknown target state %s", to)
	return s
}

// cancelRequest is the node form of a cancel: message 9 signed by the node key.
func (n node) cancelRequest(t *testing.T, id, did string, ts time.Time) api.NodeCancelRequest {
	return api.NodeCancelRequest{
		NodeDID: did, TS: ts.Unix(),
		Signature: sign(t, n.priv, canonical.Cancel{BindingSessionID: id, NodeDID: did, TS: ts.Unix()}),
	}
}

// signLines signs the given lines joined by LF, for messages the canonical package would
// refuse to render (a string with a control character, say).
func signLines(priv ed25519.PrivateKey, lines ...string) string {
	return base58.Encode(ed25519.Sign(priv, []byte(strings.Join(lines, "\n"))))
}

// tamperSig returns a well-formed signature that no longer verifies.
func tamperSig(t *testing.T, sig string) string {
	t.Helper()
	raw, err := base58.Decode(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		t.Fatalf("tamperSig: %q is not a signature", sig)
	}
	raw[10] ^= 0x01
	return base58.Encode(raw)
}

// mustJSON encodes v, failing the test if it cannot.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonTree is a request body as a generic JSON tree, so a test can remove a field, give it
// another type or a hostile value, whatever the Go request types allow.
type jsonTree map[string]any

// toTree turns a request value into a jsonTree; numbers stay json.Number, so they are sent
// back exactly as the value encoded them.
func toTree(t testing.TB, v any) jsonTree {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(mustJSON(t, v)))
	dec.UseNumber()
	var b jsonTree
	if err := dec.Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// parent returns the object that holds the last element of path, creating nothing.
func (b jsonTree) parent(path []string) map[string]any {
	m := map[string]any(b)
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

func (b jsonTree) set(path []string, v any) {
	if m := b.parent(path); m != nil {
		m[path[len(path)-1]] = v
	}
}

func (b jsonTree) del(path []string) {
	if m := b.parent(path); m != nil {
		delete(m, path[len(path)-1])
	}
}

func (b jsonTree) get(path []string) any {
	if m := b.parent(path); m != nil {
		return m[path[len(path)-1]]
	}
	return nil
}

// rawMarker stands for a value that is not JSON at all (NaN, Infinity) or that the encoder
// would not write as given (1e400): encode puts the raw text in its place.
const rawMarker = "\x00raw-value\x00"

func (b jsonTree) encode(t testing.TB, raw string) []byte {
	t.Helper()
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	marker, _ := json.Marshal(rawMarker)
	return bytes.Replace(out, marker, []byte(raw), 1)
}

// withRaw encodes the tree with the value at path replaced by raw, sent as is: it may be a
// value the encoder could not produce, such as NaN.
func (b jsonTree) withRaw(t testing.TB, raw string, path ...string) []byte {
	t.Helper()
	if b.parent(path) == nil {
		t.Fatalf("withRaw: no object holds %v", path)
	}
	b.set(path, rawMarker)
	return b.encode(t, raw)
}
