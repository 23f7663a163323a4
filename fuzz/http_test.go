package fuzz

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// httpEndpoint is one endpoint FuzzHTTP aims at. For a POST the fuzzed bytes are the body;
// for a GET they are the raw query string.
type httpEndpoint struct {
	method, path string
	bearer       bool
}

// httpEndpoints are every endpoint that decodes client input, against sessions of the
// fixture that are in the state each one acts on.
var httpEndpoints = []httpEndpoint{
	0:  {"POST", "/api/v1/register", false},
	1:  {"POST", "/api/v1/heartbeat", false},
	2:  {"POST", "/v1/auth/challenge", false},
	3:  {"POST", "/v1/auth/device-login", false},
	4:  {"POST", "/v1/bindings/initiate", false},
	5:  {"POST", "/v1/bindings/resolve", true},
	6:  {"POST", "/v1/bindings/authorize", true},
	7:  {"POST", "/v1/bindings/fz-initiated/cancel", false},
	8:  {"POST", "/v1/bindings/fz-op-cancel/cancel", true},
	9:  {"POST", "/v1/bindings/fz-op-reject/reject", true},
	10: {"POST", "/v1/node/bindings/pending", false},
	11: {"POST", "/v1/node/bindings/fz-accept/accept", false},
	12: {"POST", "/v1/node/bindings/fz-node-reject/reject", false},
	13: {"GET", "/v1/bindings/fz-initiated/status", false},
	14: {"GET", "/nodes", false},
	15: {"GET", "/peers", false},
	16: {"GET", "/api/v1/peers", false},
	17: {"GET", "/v1/operator/me/nodes", true},
	18: {"POST", "/v1/auth/revoke", false},
	19: {"POST", "/v1/bindings/fz-active/unbind", false},
	20: {"POST", "/v1/bindings/fz-op-unbind/unbind", true},
}

// httpKnownCodes are the codes the server may send, each with its status.
var httpKnownCodes = map[string]int{
	"BAD_REQUEST": 400, "TTL_TOO_LONG": 400, "ALREADY_EXPIRED": 400,
	"ID_BINDING_FAILED": 401, "ID_BINDING_REQUIRED": 401, "BAD_SIGNATURE": 401, "NO_SESSION": 401,
	"SESSION_EXPIRED": 401, "BAD_CHALLENGE": 401, "DC_ID_BINDING": 401, "DC_BAD_SIGNATURE": 401,
	"DC_EXPIRED": 401, "STALE_TS": 401, "AUTHZ_EXPIRED": 401, "DC_REVOKED": 401, "AUTHZ_REVOKED": 401,
	"PERMISSION_DENIED": 403, "SCOPE_EXCEEDED": 403, "NOT_FOUND": 404, "UNKNOWN_DID": 404,
	"METHOD_NOT_ALLOWED": 405, "SESSION_EXISTS": 409, "BAD_STATE": 409, "ALREADY_ACTIVE": 409,
	"DID_COLLISION": 409, "PAYLOAD_TOO_LARGE": 413, "RATE_LIMITED": 429, "STORE_UNAVAILABLE": 503,
}

// httpNow is the fixture's clock: fixed, so seeds signed for it stay valid.
var httpNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// httpFixture is one registry over the memory store with a registered node, a logged-in
// operator and a session in each state the endpoints act on, plus valid requests for each
// endpoint.
type httpFixture struct {
	handler http.Handler
	token   string
	seeds   [][]byte // a valid body (or query) per endpoint, by index
}

var (
	httpFixtureOnce sync.Once
	httpFixtureVal  *httpFixture
	httpFixtureErr  error
)

func httpKey(label string) (ed25519.PrivateKey, didkey.PublicKey) {
	priv := testkit.TextKey("svrp-fuzz-http/" + label)
	k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	return priv, k
}

func httpSign(priv ed25519.PrivateKey, m canonical.Message) string {
	sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
	if err != nil {
		panic(err)
	}
	return sig
}

func httpJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// fixture builds the registry through its own handler, as a client would.
func httpGetFixture(t testing.TB) *httpFixture {
	httpFixtureOnce.Do(func() { httpFixtureVal, httpFixtureErr = buildHTTPFixture() })
	if httpFixtureErr != nil {
		t.Fatal(httpFixtureErr)
	}
	return httpFixtureVal
}

func buildHTTPFixture() (*httpFixture, error) {
	svc, err := registry.New(registry.Config{
		Store: store.NewMemory(), Clock: func() time.Time { return httpNow },
		// The fuzzer sends many failing resolves and malformed requests from one address;
		// the limits are not what this target is about.
		Limits: limits.Limits{
			ResolveAddressLimit: 1 << 30, RegisterAddressLimit: 1 << 30, RevokeAddressLimit: 1 << 30,
			ResolveOperatorLimit: 1 << 30, ResolveGlobalLimit: 1 << 30, InitiateAddressLimit: 1 << 30,
			LoginFailureAddressLimit: 1 << 30, LoginFailureOperatorLimit: 1 << 30, MalformedAddressLimit: 1 << 30,
		},
	})
	if err != nil {
		return nil, err
	}
	fx := &httpFixture{handler: httpapi.New(svc), seeds: make([][]byte, len(httpEndpoints))}
	do := func(method, path string, body []byte, token string, out any) error {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return &httpSetupError{method + " " + path, rec.Body.String()}
		}
		if out != nil {
			return json.Unmarshal(rec.Body.Bytes(), out)
		}
		return nil
	}

	npriv, nkey := httpKey("node")
	ndid, _ := didkey.NodeDID(nkey, didkey.FormShort)
	node := ndid.String()
	register := func(priv ed25519.PrivateKey, key didkey.PublicKey, did string) []byte {
		r := api.RegisterRequest{DID: did, PublicKey: key.Hex(), Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}, Region: "eu-west"}
		sig := httpSign(priv, canonical.Register{DID: did, PublicKey: key.Base58(), Endpoint: r.Endpoint, Capabilities: r.Capabilities, Region: r.Region})
		r.Signature = &sig
		return httpJSON(r)
	}
	if err := do("POST", "/api/v1/register", register(npriv, nkey, node), "", nil); err != nil {
		return nil, err
	}
	opriv, okey := httpKey("other-node")
	odid, _ := didkey.NodeDID(okey, didkey.FormFull)
	fx.seeds[0] = register(opriv, okey, odid.String())
	ts := httpNow.Unix()
	fx.seeds[1] = httpJSON(api.HeartbeatRequest{DID: node, TS: ts, Signature: httpSign(npriv, canonical.Heartbeat{DID: node, TS: ts})})
	fx.seeds[2] = []byte{}

	root, _ := httpKey("root")
	device, _ := httpKey("device")
	cred, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{
		IssuedAt: httpNow.Add(-time.Hour), Validity: 25 * time.Hour, CredentialID: "cred-fuzz", DeviceID: "fuzz", RevocationID: "rev-fuzz",
	})
	if err != nil {
		return nil, err
	}
	login := func() ([]byte, error) {
		var ch api.ChallengeResult
		if err := do("POST", "/v1/auth/challenge", nil, "", &ch); err != nil {
			return nil, err
		}
		issued := canonical.FormatTime(httpNow)
		return httpJSON(authn.Login{DeviceCredential: cred, Challenge: ch.Challenge, IssuedAt: issued,
			Signature: httpSign(device, canonical.Login{OperatorDID: cred.OperatorDID, DevicePublicKey: cred.DevicePublicKey, Challenge: ch.Challenge, IssuedAt: issued})}), nil
	}
	body, err := login()
	if err != nil {
		return nil, err
	}
	var lr api.LoginResult
	if err := do("POST", "/v1/auth/device-login", body, "", &lr); err != nil {
		return nil, err
	}
	fx.token = lr.SessionToken
	if fx.seeds[3], err = login(); err != nil {
		return nil, err
	}

	initiate := func(id string) []byte {
		req := binding.InitiateRequest{BindingSession: canonical.BindingSession{
			BindingSessionID: id, NodeDID: node, NodePublicKey: nkey.Base58(), DeviceSummary: "fuzz box", OS: "linux",
			Region: "eu-west", RequestedTaskTypes: []string{"inference"}, RequestedSingleLimit: ptrFloat(10),
			Nonce: "nonce-" + id, CreatedAt: canonical.FormatTime(httpNow), ExpiresAt: canonical.FormatTime(httpNow.Add(10 * time.Minute)),
		}}
		req.NodeSignature = httpSign(npriv, req.BindingSession)
		return httpJSON(req)
	}
	codes := map[string]api.InitiateResult{}
	for _, id := range []string{"fz-initiated", "fz-to-resolve", "fz-resolved", "fz-op-cancel", "fz-op-reject", "fz-accept", "fz-node-reject"} {
		var ir api.InitiateResult
		if err := do("POST", "/v1/bindings/initiate", initiate(id), "", &ir); err != nil {
			return nil, err
		}
		codes[id] = ir
	}
	fx.seeds[4] = initiate("fz-new")
	views := map[string]api.ResolveView{}
	for _, id := range []string{"fz-resolved", "fz-op-cancel", "fz-op-reject", "fz-accept", "fz-node-reject"} {
		var v api.ResolveView
		if err := do("POST", "/v1/bindings/resolve", httpJSON(api.ResolveRequest{ShortCode: codes[id].ShortCode}), fx.token, &v); err != nil {
			return nil, err
		}
		views[id] = v
	}
	fx.seeds[5] = httpJSON(api.ResolveRequest{ShortCode: strings.ToLower(codes["fz-to-resolve"].ShortCode), NodeDID: node})
	authorize := func(id string) []byte {
		az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
			BindingSessionID: id, NodeDID: node, OperatorDID: cred.OperatorDID, TaskTypes: []string{"inference"},
			SingleLimit: ptrFloat(5), DailyLimit: ptrFloat(50), RevocationID: "authz-" + id,
			IssuedAt: canonical.FormatTime(httpNow), ExpiresAt: canonical.FormatTime(httpNow.Add(time.Hour)),
		}}
		az.Signature = httpSign(device, az.Authorization)
		return httpJSON(api.AuthorizeRequest{BindingSessionID: id, DeviceCredential: cred, AuthorizationCredential: az})
	}
	for _, id := range []string{"fz-accept", "fz-node-reject"} {
		if err := do("POST", "/v1/bindings/authorize", authorize(id), fx.token, nil); err != nil {
			return nil, err
		}
	}
	fx.seeds[6] = authorize("fz-resolved")
	fx.seeds[7] = httpJSON(api.NodeCancelRequest{NodeDID: node, TS: ts, Signature: httpSign(npriv, canonical.Cancel{BindingSessionID: "fz-initiated", NodeDID: node, TS: ts})})
	fx.seeds[8], fx.seeds[9] = []byte{}, []byte{}
	fx.seeds[10] = httpJSON(api.PendingRequest{NodeDID: node, NodePublicKey: nkey.Base58(), TS: ts, Signature: httpSign(npriv, canonical.Poll{NodeDID: node, TS: ts})})
	var pend api.PendingResult
	if err := do("POST", "/v1/node/bindings/pending", fx.seeds[10], "", &pend); err != nil {
		return nil, err
	}
	digests := map[string]string{}
	for _, p := range pend.Pending {
		if digests[p.BindingSessionID], err = p.AuthorizationCredential.Authorization.Digest(canonical.DefaultPrefix); err != nil {
			return nil, err
		}
	}
	if len(digests) != 2 {
		return nil, &httpSetupError{"pending", string(httpJSON(pend))}
	}
	acceptance := func(id string, accepted bool) []byte {
		acc := binding.Acceptance{Acceptance: canonical.Acceptance{
			BindingSessionID: id, NodeDID: node, OperatorDID: cred.OperatorDID,
			AuthorizationDigest: digests[id], Accepted: accepted, IssuedAt: canonical.FormatTime(httpNow),
		}}
		acc.Signature = httpSign(npriv, acc.Acceptance)
		return httpJSON(api.AcceptanceRequest{Acceptance: acc})
	}
	fx.seeds[11], fx.seeds[12] = acceptance("fz-accept", true), acceptance("fz-node-reject", false)
	// Two ACTIVE sessions for the unbind endpoints, each of its own node key, so that the
	// accept seed, which binds the main node again, supersedes neither.
	for _, id := range []string{"fz-active", "fz-op-unbind"} {
		priv, key := httpKey(id)
		d, _ := didkey.NodeDID(key, didkey.FormShort)
		did := d.String()
		req := binding.InitiateRequest{BindingSession: canonical.BindingSession{
			BindingSessionID: id, NodeDID: did, NodePublicKey: key.Base58(), RequestedTaskTypes: []string{"inference"},
			Nonce: "nonce-" + id, CreatedAt: canonical.FormatTime(httpNow), ExpiresAt: canonical.FormatTime(httpNow.Add(10 * time.Minute)),
		}}
		req.NodeSignature = httpSign(priv, req.BindingSession)
		var ir api.InitiateResult
		if err := do("POST", "/v1/bindings/initiate", httpJSON(req), "", &ir); err != nil {
			return nil, err
		}
		if err := do("POST", "/v1/bindings/resolve", httpJSON(api.ResolveRequest{ShortCode: ir.ShortCode}), fx.token, nil); err != nil {
			return nil, err
		}
		az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
			BindingSessionID: id, NodeDID: did, OperatorDID: cred.OperatorDID, TaskTypes: []string{"inference"},
			RevocationID: "authz-" + id, IssuedAt: canonical.FormatTime(httpNow), ExpiresAt: canonical.FormatTime(httpNow.Add(time.Hour)),
		}}
		az.Signature = httpSign(device, az.Authorization)
		if err := do("POST", "/v1/bindings/authorize", httpJSON(api.AuthorizeRequest{BindingSessionID: id, DeviceCredential: cred, AuthorizationCredential: az}), fx.token, nil); err != nil {
			return nil, err
		}
		digest, err := az.Digest(canonical.DefaultPrefix)
		if err != nil {
			return nil, err
		}
		acc := binding.Acceptance{Acceptance: canonical.Acceptance{
			BindingSessionID: id, NodeDID: did, OperatorDID: cred.OperatorDID, AuthorizationDigest: digest, Accepted: true, IssuedAt: canonical.FormatTime(httpNow),
		}}
		acc.Signature = httpSign(priv, acc.Acceptance)
		if err := do("POST", "/v1/node/bindings/"+id+"/accept", httpJSON(api.AcceptanceRequest{Acceptance: acc}), "", nil); err != nil {
			return nil, err
		}
		if id == "fz-active" {
			fx.seeds[19] = httpJSON(api.NodeUnbindRequest{NodeDID: did, TS: ts, Signature: httpSign(priv, canonical.Unbind{BindingSessionID: id, NodeDID: did, TS: ts})})
		}
	}
	// A revocation of an id the fixture's credential does not carry, so that replaying it
	// leaves the token and the seeds working.
	rev := canonical.Revocation{OperatorDID: cred.OperatorDID, OperatorRootPublicKey: cred.OperatorRootPublicKey, RevocationID: "rev-spare", RevokedAt: canonical.FormatTime(httpNow)}
	fx.seeds[18] = httpJSON(authn.SignedRevocation{Revocation: rev, Signature: httpSign(root, rev)})
	fx.seeds[20] = []byte{}
	fx.seeds[13] = []byte{}
	fx.seeds[14] = []byte("online_within=600&capability=inference&region=eu-west&callable=1")
	fx.seeds[15] = []byte("capability=inference&capability=gpu")
	fx.seeds[16] = []byte("online_within=0")
	fx.seeds[17] = []byte("online_within=3600")
	return fx, nil
}

func ptrFloat(v float64) *float64 { return &v }

type httpSetupError struct{ what, answer string }

func (e *httpSetupError) Error() string { return "fuzz fixture: " + e.what + ": " + e.answer }

// serve sends one fuzzed request to endpoint i and returns the recorder.
func (fx *httpFixture) serve(i int, input []byte) *httptest.ResponseRecorder {
	ep := httpEndpoints[i]
	var req *http.Request
	if ep.method == "GET" {
		req = httptest.NewRequest(ep.method, ep.path, nil)
		req.URL.RawQuery = string(input)
	} else {
		req = httptest.NewRequest(ep.method, ep.path, bytes.NewReader(input))
		req.Header.Set("Content-Type", "application/json")
	}
	if ep.bearer {
		req.Header.Set("Authorization", "Bearer "+fx.token)
	}
	rec := httptest.NewRecorder()
	fx.handler.ServeHTTP(rec, req)
	return rec
}

// httpRejectSeeds turns each case of rejects.json into a body for the endpoint that
// carries its message: the case's field object, wrapped the way that endpoint wraps it.
func httpRejectSeeds(t testing.TB) []struct {
	endpoint uint8
	body     []byte
} {
	f := testkit.Rejects(t)
	var out []struct {
		endpoint uint8
		body     []byte
	}
	add := func(ep uint8, body string) {
		out = append(out, struct {
			endpoint uint8
			body     []byte
		}{ep, []byte(body)})
	}
	cred := string(f.BaseFields["2"])
	for _, c := range f.Cases {
		switch c.Message {
		case 1:
			add(3, `{"device_credential":`+cred+`,"challenge":"x","issued_at":"2025-01-15T10:30:00Z","signature":"x",`+strings.TrimPrefix(c.FieldsJSON, "{"))
		case 2:
			add(3, `{"device_credential":`+c.FieldsJSON+`,"challenge":"x","issued_at":"2025-01-15T10:30:00Z","signature":"x"}`)
			add(6, `{"binding_session_id":"fz-resolved","device_credential":`+c.FieldsJSON+`,"authorization_credential":`+string(f.BaseFields["7"])+`}`)
		case 3:
			add(0, c.FieldsJSON)
		case 4:
			add(1, c.FieldsJSON)
		case 5:
			add(10, c.FieldsJSON)
		case 6:
			add(4, c.FieldsJSON)
		case 7:
			add(6, `{"binding_session_id":"fz-resolved","device_credential":`+cred+`,"authorization_credential":`+c.FieldsJSON+`}`)
		case 8:
			add(11, `{"acceptance":`+c.FieldsJSON+`}`)
			add(12, `{"acceptance":`+c.FieldsJSON+`}`)
		case 9:
			add(7, c.FieldsJSON)
		}
	}
	if len(out) < len(f.Cases) {
		t.Fatalf("rejects.json gave %d seeds for %d cases", len(out), len(f.Cases))
	}
	return out
}

// TestFuzzHTTPSeedsAccepted: the valid seed of every endpoint is accepted by a fresh
// fixture, so the fuzzer starts from requests that reach each endpoint's last check.
func TestFuzzHTTPSeedsAccepted(t *testing.T) {
	fx, err := buildHTTPFixture()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range fx.seeds {
		if rec := fx.serve(i, s); rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s", httpEndpoints[i].method, httpEndpoints[i].path, rec.Code, rec.Body.Bytes())
		}
	}
}

// FuzzHTTP serves any bytes to any endpoint of the registry's HTTP API: no input may
// panic the handler or get a 5xx, and every refusal is exactly {"code","error"} with a code
// the protocol defines, sent with that code's status.
func FuzzHTTP(f *testing.F) {
	fx := httpGetFixture(f)
	for i, s := range fx.seeds {
		f.Add(uint8(i), s)
	}
	for _, s := range httpRejectSeeds(f) {
		f.Add(s.endpoint, s.body)
	}
	for i := range httpEndpoints {
		f.Add(uint8(i), []byte(`{"a":`))
		f.Add(uint8(i), []byte(`[]`))
		f.Add(uint8(i), bytes.Repeat([]byte("x"), httpapi.MaxBodyBytes+1))
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, input []byte) {
		i := int(endpoint) % len(httpEndpoints)
		rec := fx.serve(i, input)
		what := httpEndpoints[i].method + " " + httpEndpoints[i].path
		if rec.Code >= 500 {
			t.Fatalf("%s: status %d for %q: %s", what, rec.Code, input, rec.Body.Bytes())
		}
		if rec.Code == http.StatusOK {
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &fields); err != nil || len(fields) != 2 {
			t.Fatalf("%s: error body %q is not {code, error}", what, rec.Body.Bytes())
		}
		var e api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s: error body %q is not {code, error}", what, rec.Body.Bytes())
		}
		status, known := httpKnownCodes[e.Code]
		if !known || status != rec.Code {
			t.Fatalf("%s: %d %s: unknown code or wrong status", what, rec.Code, e.Code)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: error with Content-Type %q", what, ct)
		}
	})
}

// FuzzRegisterV2Verify posts any body to POST /api/v1/register of a registry whose clock
// stands at the vectors' time, after a valid v2 registration of the vectors' node. Whatever
// the body: no panic, a known code, and the rules of docs/protocol.md §10.1 hold — an accepted v2
// registration verified over message 10 and is newer than the last one (or repeats it
// exactly), a refused one changed nothing, and posting the same body again changes nothing.
func FuzzRegisterV2Verify(f *testing.F) {
	c := extensionCases(f, 10)[0]
	seed, err := hex.DecodeString(c.SeedHex)
	if err != nil {
		f.Fatal(err)
	}
	var vec canonical.RegisterV2
	if err := json.Unmarshal(c.Fields, &vec); err != nil {
		f.Fatalf("%s: %v", c.ID, err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	key, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	body := func(m canonical.RegisterV2, sig *string, tsRaw string) []byte {
		r := map[string]any{"did": m.DID, "public_key": key.Hex(), "endpoint": m.Endpoint, "capabilities": m.Capabilities}
		if m.Region != "" {
			r["region"] = m.Region
		}
		if sig != nil {
			r["signature"] = *sig
		}
		raw, _ := json.Marshal(r)
		if tsRaw != "" {
			raw = append(raw[:len(raw)-1], []byte(`,"ts":`+tsRaw+`}`)...)
		}
		return raw
	}
	signAt := func(m canonical.RegisterV2, ts int64) (canonical.RegisterV2, string) {
		m.TS = ts
		m.PublicKey = key.Base58()
		sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
		if err != nil {
			f.Fatal(err)
		}
		return m, sig
	}
	base, baseSig := signAt(vec, vec.TS)
	f.Add(body(base, &baseSig, "1736937000")) // the stored registration again
	newer, newerSig := signAt(vec, vec.TS+1)
	f.Add(body(newer, &newerSig, "1736937001")) // a newer one
	older, olderSig := signAt(vec, vec.TS-1)
	f.Add(body(older, &olderSig, "1736936999"))    // an older one
	f.Add(body(newer, &newerSig, "1736937002"))    // ts other than signed
	f.Add(body(newer, nil, "1736937001"))          // unsigned v2
	f.Add(body(newer, &newerSig, ""))              // a v2 signature sent as v1
	f.Add(body(newer, &newerSig, `"1736937001"`))  // ts a string
	f.Add(body(newer, &newerSig, "1.736937001e9")) // ts not an integer
	f.Add(body(newer, &newerSig, "null"))          // ts null: a v1 registration
	far, farSig := signAt(vec, vec.TS+301)
	f.Add(body(far, &farSig, "1736937301")) // outside the window
	long := string(bytes.Repeat([]byte("<"), 257))
	f.Add(body(newer, &long, "1736937001")) // signature over its cap

	f.Fuzz(func(t *testing.T, in []byte) {
		now := time.Unix(vec.TS, 0).UTC()
		svc, err := registry.New(registry.Config{Store: store.NewMemory(), Clock: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		h := httpapi.New(svc)
		post := func(b []byte) (int, []byte) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/api/v1/register", bytes.NewReader(b)))
			return w.Code, w.Body.Bytes()
		}
		if code, out := post(body(base, &baseSig, "1736937000")); code != http.StatusOK {
			t.Fatalf("the vector registration: %d %s", code, out)
		}
		snapshot := func() []store.Node {
			nodes, err := svc.Nodes(context.Background(), api.NodeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			return nodes
		}
		before := snapshot()
		code, out := post(in)
		after := snapshot()
		if code != http.StatusOK {
			var e api.ErrorBody
			if json.Unmarshal(out, &e) != nil || httpKnownCodes[e.Code] != code {
				t.Fatalf("status %d with body %s", code, out)
			}
			if !sameNodes(before, after) {
				t.Fatalf("a refused registration (%s) changed the table", e.Code)
			}
			return
		}
		var res api.RegisterResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("200 with body %s", out)
		}
		if ts := res.Data.RegistrationTS; ts != nil {
			k, err := didkey.DecodeKey(res.Data.PublicKey)
			if err != nil || res.Data.Signature == nil {
				t.Fatalf("a v2 record without a usable key or signature: %s", out)
			}
			region := ""
			if res.Data.Region != nil {
				region = *res.Data.Region
			}
			m := canonical.RegisterV2{DID: res.Data.DID, PublicKey: k.Base58(), Endpoint: res.Data.Endpoint, Capabilities: res.Data.Capabilities, Region: region, TS: *ts}
			if err := canonical.Verify(k, canonical.DefaultPrefix, m, *res.Data.Signature); err != nil {
				t.Fatalf("a v2 record that does not re-verify over message 10: %v", err)
			}
			if k == key && *ts < vec.TS {
				t.Fatalf("registration_ts went back from %d to %d", vec.TS, *ts)
			}
		}
		again, outAgain := post(in)
		if again != http.StatusOK || !sameNodes(after, snapshot()) {
			t.Fatalf("posting the same registration again: %d %s, or it changed the table", again, outAgain)
		}
	})
}

func sameNodes(a, b []store.Node) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
