package registry_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

// withHeader sends a request with the given Authorization header, verbatim, and returns
// the status and the error code ("" when the answer is not an error).
func (h *harness) withHeader(method, path, authorization string) (int, string) {
	h.t.Helper()
	status, raw := h.request(method, path, nil, authorization)
	var e api.ErrorBody
	json.Unmarshal(raw, &e)
	return status, e.Code
}

// challengeLogin logs op in with challenge ch, which must be used up (BAD_CHALLENGE) when used
// is true, and still good otherwise.
func (h *harness) challengeLogin(op operator, ch string, used bool) {
	h.t.Helper()
	if used {
		h.fails("POST", "/v1/auth/device-login", op.loginRequest(h.t, ch, h.now()), "", http.StatusUnauthorized, "BAD_CHALLENGE")
	} else {
		h.ok("POST", "/v1/auth/device-login", op.loginRequest(h.t, ch, h.now()), "", nil)
	}
}

// signCred re-signs a DeviceCredential with the operator's root key after a test changed it.
func (o operator) signCred(t *testing.T, dc authn.DeviceCredential) authn.DeviceCredential {
	dc.Signature = sign(t, o.root, dc.DeviceCredential)
	return dc
}

// loginWith is a login for challenge with cred, signed by the device key over the
// credential's own fields.
func (o operator) loginWith(t *testing.T, cred authn.DeviceCredential, challenge string, now time.Time) authn.Login {
	issued := canonical.FormatTime(now)
	return authn.Login{
		DeviceCredential: cred, Challenge: challenge, IssuedAt: issued,
		Signature: sign(t, o.device, canonical.Login{OperatorDID: cred.OperatorDID, DevicePublicKey: cred.DevicePublicKey, Challenge: challenge, IssuedAt: issued}),
	}
}

func TestChallenge(t *testing.T) {
	h := newHarness(t)
	seen := map[string]bool{}
	for _, body := range []any{nil, "{}", "not json at all", `{"did":"x"}`, "[1,2]"} {
		var ch api.ChallengeResult
		h.ok("POST", "/v1/auth/challenge", body, "", &ch)
		raw, err := base58.Decode(ch.Challenge)
		if err != nil || len(raw) != 24 || ch.ExpiresIn != 300 {
			t.Fatalf("challenge %+v: %d bytes, %v", ch, len(raw), err)
		}
		if seen[ch.Challenge] {
			t.Fatalf("challenge %s issued twice", ch.Challenge)
		}
		seen[ch.Challenge] = true
	}
	h.fails("GET", "/v1/auth/challenge", nil, "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	h.fails("POST", "/v1/auth/challenge", strings.Repeat(" ", httpapi.MaxBodyBytes+1), "", http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
}

func TestDeviceLoginSuccess(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")

	hexCred := op.cred
	hexCred.OperatorRootPublicKey = pub(op.root).Hex()
	hexCred.DevicePublicKey = pub(op.device).Hex()
	hexCred = op.signCred(t, hexCred)

	noPerms := op.cred
	noPerms.Permissions = nil
	noPerms = op.signCred(t, noPerms)

	fallback := op.cred
	fd, _ := didkey.OperatorDID(pub(op.root), didkey.FormFallback)
	fallback.OperatorDID = fd.String()
	fallback = op.signCred(t, fallback)

	edges := op.cred
	edges.IssuedAt = canonical.FormatTime(h.now().Add(5 * time.Second))
	edges.ExpiresAt = canonical.FormatTime(h.now().Add(-5 * time.Second))
	edges = op.signCred(t, edges)

	for name, cred := range map[string]authn.DeviceCredential{
		"base58 keys":                   op.cred,
		"hex keys":                      hexCred,
		"no permissions":                noPerms,
		"10-hex operator DID":           fallback,
		"at both edges of the 5 s skew": edges,
	} {
		t.Run(name, func(t *testing.T) {
			h := h.in(t)
			var res api.LoginResult
			h.ok("POST", "/v1/auth/device-login", op.loginWith(t, cred, h.challenge(), h.now()), "", &res)
			raw, err := base58.Decode(res.SessionToken)
			if err != nil || len(raw) != 32 || res.OperatorDID != cred.OperatorDID || res.ExpiresIn != 3600 {
				t.Fatalf("login answer %+v", res)
			}
			var mine api.OperatorNodes
			h.ok("GET", "/v1/operator/me/nodes", nil, res.SessionToken, &mine)
			if mine.OperatorDID != cred.OperatorDID {
				t.Fatalf("session is for %s, want %s", mine.OperatorDID, cred.OperatorDID)
			}
		})
	}
}

// TestDeviceLoginCodes walks the checks of docs/protocol.md §5.2 in order. Each case says whether
// it burns the challenge: only steps 5 and 6 do.
func TestDeviceLoginCodes(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	other := newOperator(t, "other", h.now(), "nodes.bind")

	// mutate returns a change to op's credential, re-signed by op's root key.
	mutate := func(f func(*authn.DeviceCredential)) func(authn.Login) any {
		return func(l authn.Login) any {
			f(&l.DeviceCredential)
			l.DeviceCredential = op.signCred(t, l.DeviceCredential)
			return op.loginWith(t, l.DeviceCredential, l.Challenge, h.now())
		}
	}
	field := func(raw string, path ...string) func(authn.Login) any {
		return func(l authn.Login) any { return toTree(t, l).withRaw(t, raw, path...) }
	}
	dropCred := func(name string) func(authn.Login) any {
		return func(l authn.Login) any {
			body := toTree(t, l)
			body.del([]string{"device_credential", name})
			return body.encode(t, "")
		}
	}
	unknownChallenge := base58.Encode(make([]byte, 24))

	tests := []struct {
		name     string
		req      func(l authn.Login) any
		status   int
		code     string
		consumed bool
	}{
		// Step 1: shape and injectivity.
		{"body not an object", func(authn.Login) any { return `"login"` }, 400, "BAD_REQUEST", false},
		{"empty body", func(authn.Login) any { return "" }, 400, "BAD_REQUEST", false},
		{"no device_credential", field("null", "device_credential"), 400, "BAD_REQUEST", false},
		{"device_credential a string", field(`"cred"`, "device_credential"), 400, "BAD_REQUEST", false},
		{"challenge a number", field("7", "challenge"), 400, "BAD_REQUEST", false},
		{"no issued_at", field("null", "issued_at"), 400, "BAD_REQUEST", false},
		{"signature an array", field(`["x"]`, "signature"), 400, "BAD_REQUEST", false},
		{"no credential_id", dropCred("credential_id"), 400, "BAD_REQUEST", false},
		{"no operator_did", dropCred("operator_did"), 400, "BAD_REQUEST", false},
		{"no operator_root_public_key", dropCred("operator_root_public_key"), 400, "BAD_REQUEST", false},
		{"no device_id", dropCred("device_id"), 400, "BAD_REQUEST", false},
		{"no device_public_key", dropCred("device_public_key"), 400, "BAD_REQUEST", false},
		{"no credential issued_at", dropCred("issued_at"), 400, "BAD_REQUEST", false},
		{"no credential expires_at", dropCred("expires_at"), 400, "BAD_REQUEST", false},
		{"no revocation_id", dropCred("revocation_id"), 400, "BAD_REQUEST", false},
		{"no credential signature", dropCred("signature"), 400, "BAD_REQUEST", false},
		{"operator_did a number", field("1", "device_credential", "operator_did"), 400, "BAD_REQUEST", false},
		{"permissions an object", field(`{"a":1}`, "device_credential", "permissions"), 400, "BAD_REQUEST", false},
		{"operator_did with LF", field(`"did:svrp:o:1234\n"`, "device_credential", "operator_did"), 400, "BAD_REQUEST", false},
		{"root key with DEL", field(`"\u007f"`, "device_credential", "operator_root_public_key"), 400, "BAD_REQUEST", false},
		{"device_public_key with CR", field(`"abc\r"`, "device_credential", "device_public_key"), 400, "BAD_REQUEST", false},
		{"65 permissions", field(`[`+strings.Repeat(`"p",`, 64)+`"p"]`, "device_credential", "permissions"), 400, "BAD_REQUEST", false},
		// A shape error is reported before a bad credential: step 1 comes first.
		{"shape error and wrong root", func(l authn.Login) any {
			l.DeviceCredential.OperatorRootPublicKey = pub(other.root).Base58()
			return toTree(t, l).withRaw(t, "7", "challenge")
		}, 400, "BAD_REQUEST", false},

		// Step 2: id-binding of the credential.
		{"operator DID of another root", mutate(func(dc *authn.DeviceCredential) { dc.OperatorDID = other.did }), 401, "DC_ID_BINDING", false},
		{"root key of another operator", mutate(func(dc *authn.DeviceCredential) { dc.OperatorRootPublicKey = pub(other.root).Base58() }), 401, "DC_ID_BINDING", false},
		{"node-tagged operator DID", mutate(func(dc *authn.DeviceCredential) {
			dc.OperatorDID = "did:svrp:n:" + pub(op.root).ShortBody()
		}), 401, "DC_ID_BINDING", false},
		{"operator DID of another method", mutate(func(dc *authn.DeviceCredential) { dc.OperatorDID = "did:key:z6Mk" }), 401, "DC_ID_BINDING", false},
		{"root key not 32 bytes", mutate(func(dc *authn.DeviceCredential) { dc.OperatorRootPublicKey = base58.Encode(make([]byte, 31)) }), 401, "DC_ID_BINDING", false},
		{"wrong root with a bad signature and an unknown challenge", func(l authn.Login) any {
			l.DeviceCredential.OperatorRootPublicKey = pub(other.root).Base58()
			l.Challenge = unknownChallenge
			return l
		}, 401, "DC_ID_BINDING", false},

		// Step 3: the credential's signature.
		{"credential signature tampered", func(l authn.Login) any {
			l.DeviceCredential.Signature = tamperSig(t, l.DeviceCredential.Signature)
			return l
		}, 401, "DC_BAD_SIGNATURE", false},
		{"credential signed by the device key", func(l authn.Login) any {
			l.DeviceCredential.Signature = sign(t, op.device, l.DeviceCredential.DeviceCredential)
			return l
		}, 401, "DC_BAD_SIGNATURE", false},
		{"credential changed after signing", func(l authn.Login) any {
			l.DeviceCredential.Permissions = append(l.DeviceCredential.Permissions, "nodes.admin")
			return l
		}, 401, "DC_BAD_SIGNATURE", false},
		{"credential signature not base58", func(l authn.Login) any {
			l.DeviceCredential.Signature = "0OIl"
			return l
		}, 401, "DC_BAD_SIGNATURE", false},
		{"credential signature empty", func(l authn.Login) any {
			l.DeviceCredential.Signature = ""
			return l
		}, 401, "DC_BAD_SIGNATURE", false},
		{"bad credential signature and expired credential and unknown challenge", func(l authn.Login) any {
			l.DeviceCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
			l.Challenge = unknownChallenge
			return l
		}, 401, "DC_BAD_SIGNATURE", false},

		// Step 4: the credential's validity window, 5 s of skew.
		{"credential issued 6 s ahead", mutate(func(dc *authn.DeviceCredential) { dc.IssuedAt = canonical.FormatTime(h.now().Add(6 * time.Second)) }), 401, "DC_EXPIRED", false},
		{"credential expired 6 s ago", mutate(func(dc *authn.DeviceCredential) { dc.ExpiresAt = canonical.FormatTime(h.now().Add(-6 * time.Second)) }), 401, "DC_EXPIRED", false},
		{"credential timestamp malformed", mutate(func(dc *authn.DeviceCredential) { dc.ExpiresAt = "2030-01-01 00:00:00" }), 401, "DC_EXPIRED", false},
		{"expired credential and unknown challenge", func(l authn.Login) any {
			l.DeviceCredential.ExpiresAt = canonical.FormatTime(h.now().Add(-time.Hour))
			l.DeviceCredential = op.signCred(t, l.DeviceCredential)
			l.Challenge = unknownChallenge
			return l
		}, 401, "DC_EXPIRED", false},

		// Step 5: the challenge.
		{"unknown challenge", func(l authn.Login) any { return op.loginWith(t, l.DeviceCredential, unknownChallenge, h.now()) }, 401, "BAD_CHALLENGE", false},
		{"challenge not base58", func(l authn.Login) any { return op.loginWith(t, l.DeviceCredential, "0OIl0OIl", h.now()) }, 401, "BAD_CHALLENGE", false},
		{"challenge empty", func(l authn.Login) any { return op.loginWith(t, l.DeviceCredential, "", h.now()) }, 401, "BAD_CHALLENGE", false},
		{"challenge with LF", func(l authn.Login) any {
			l.Challenge += "\n"
			return l
		}, 401, "BAD_CHALLENGE", false},
		{"challenge of another registry", func(l authn.Login) any {
			return op.loginWith(t, l.DeviceCredential, newHarness(t).challenge(), h.now())
		}, 401, "BAD_CHALLENGE", false},
		{"unknown challenge and a bad login signature", func(l authn.Login) any {
			l.Challenge = unknownChallenge
			return l
		}, 401, "BAD_CHALLENGE", false},

		// Step 6: the login signature; the challenge is burnt.
		{"login signed by the root key", func(l authn.Login) any {
			l.Signature = sign(t, op.root, canonical.Login{OperatorDID: op.did, DevicePublicKey: op.cred.DevicePublicKey, Challenge: l.Challenge, IssuedAt: l.IssuedAt})
			return l
		}, 401, "BAD_SIGNATURE", true},
		{"login signature tampered", func(l authn.Login) any {
			l.Signature = tamperSig(t, l.Signature)
			return l
		}, 401, "BAD_SIGNATURE", true},
		{"login signature over another issued_at", func(l authn.Login) any {
			l.IssuedAt = canonical.FormatTime(h.now().Add(time.Second))
			return l
		}, 401, "BAD_SIGNATURE", true},
		{"login signature over the hex device key", func(l authn.Login) any {
			l.Signature = sign(t, op.device, canonical.Login{OperatorDID: op.did, DevicePublicKey: pub(op.device).Hex(), Challenge: l.Challenge, IssuedAt: l.IssuedAt})
			return l
		}, 401, "BAD_SIGNATURE", true},
		{"login signature not base58", func(l authn.Login) any {
			l.Signature = "0OIl"
			return l
		}, 401, "BAD_SIGNATURE", true},
		{"issued_at with milliseconds, signed as sent", func(l authn.Login) any {
			l.IssuedAt = "2026-03-01T12:00:00.000Z"
			l.Signature = sign(t, op.device, canonical.Login{OperatorDID: op.did, DevicePublicKey: op.cred.DevicePublicKey, Challenge: l.Challenge, IssuedAt: l.IssuedAt})
			return l
		}, 401, "BAD_SIGNATURE", true},
		// docs/protocol.md §5.2: an unparsable credential key is DC_ID_BINDING, the device key too,
		// so it fails at step 2 and leaves the challenge usable.
		{"device key not 32 bytes", mutate(func(dc *authn.DeviceCredential) { dc.DevicePublicKey = base58.Encode(make([]byte, 33)) }), 401, "DC_ID_BINDING", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			ch := h.challenge()
			h.fails("POST", "/v1/auth/device-login", tt.req(op.loginRequest(t, ch, h.now())), "", tt.status, tt.code)
			h.challengeLogin(op, ch, tt.consumed)
		})
	}
}

// TestDeviceLoginChallengeLife: a challenge is single-use and lives 300 s.
func TestDeviceLoginChallengeLife(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")

	ch := h.challenge()
	h.challengeLogin(op, ch, false)
	h.challengeLogin(op, ch, true)

	ch = h.challenge()
	h.clock.Advance(299 * time.Second)
	h.challengeLogin(op, ch, false)

	ch = h.challenge()
	h.clock.Advance(300 * time.Second)
	h.challengeLogin(op, ch, true)

	ch = h.challenge()
	h.clock.Advance(time.Hour)
	h.challengeLogin(op, ch, true)
}

// TestDeviceLoginOperatorVectors sends the operator DIDs of dids.json as a credential's
// operator_did and root key: DC_ID_BINDING, and the challenge survives.
func TestDeviceLoginOperatorVectors(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	for _, neg := range didNegatives(t, "POST /v1/auth/device-login", 1) {
		t.Run(neg.ID, func(t *testing.T) {
			h := h.in(t)
			ch := h.challenge()
			cred := op.cred
			cred.OperatorDID, cred.OperatorRootPublicKey = neg.DID, neg.PublicKey
			h.fails("POST", "/v1/auth/device-login", op.loginWith(t, op.signCred(t, cred), ch, h.now()), "", neg.Expected.HTTP, neg.Expected.Code)
			h.challengeLogin(op, ch, false)
		})
	}
}

// TestDeviceLoginRejects sends the message-1 and message-2 cases of rejects.json in an
// otherwise valid login of a test operator; a case signs the offending string as given, so
// only the rule it breaks can refuse it.
func TestDeviceLoginRejects(t *testing.T) {
	h := newHarness(t)
	op := newOperator(t, "op", h.now(), "nodes.bind")
	for _, c := range rejectVectors(t, 1) {
		t.Run(c.ID, func(t *testing.T) {
			h := h.in(t)
			var issued string
			if err := json.Unmarshal([]byte(rejectValue(t, c)), &issued); err != nil || c.Field != "issued_at" {
				t.Fatalf("unexpected message-1 case %s", c.ID)
			}
			ch := h.challenge()
			l := op.loginRequest(t, ch, h.now())
			l.IssuedAt = issued
			l.Signature = signLines(op.device, "service-auth-challenge:v1", op.did, op.cred.DevicePublicKey, ch, issued)
			h.fails("POST", "/v1/auth/device-login", l, "", c.Expected.HTTP, c.Expected.Code)
			if !c.Expected.Consumed() {
				t.Fatalf("%s: expected the challenge kept", c.ID)
			}
			h.challengeLogin(op, ch, true)
		})
	}
	for _, c := range rejectVectors(t, 2) {
		t.Run(c.ID, func(t *testing.T) {
			h := h.in(t)
			ch := h.challenge()
			l := op.loginRequest(t, ch, h.now())
			var body any = toTree(t, l).withRaw(t, rejectValue(t, c), "device_credential", c.Field)
			if c.Stage == "credential_validity" {
				// Signed over the string as given, so DC_BAD_SIGNATURE cannot come first.
				var s string
				if err := json.Unmarshal([]byte(rejectValue(t, c)), &s); err != nil {
					t.Fatalf("%s: %v", c.ID, err)
				}
				cred := op.cred
				switch c.Field {
				case "issued_at":
					cred.IssuedAt = s
				case "expires_at":
					cred.ExpiresAt = s
				default:
					t.Fatalf("%s: unexpected field %s", c.ID, c.Field)
				}
				body = op.loginWith(t, op.signCred(t, cred), ch, h.now())
			}
			h.fails("POST", "/v1/auth/device-login", body, "", c.Expected.HTTP, c.Expected.Code)
			h.challengeLogin(op, ch, c.Expected.Consumed())
		})
	}
}

// TestOperatorViews reads /me/nodes, /me/credits and /me/evidence with and without a
// session, and through a session's last second.
func TestOperatorViews(t *testing.T) {
	h, op, token := newLoggedIn(t)
	expired := op.login(h)
	h.clock.Advance(10 * time.Minute)
	fresh := op.login(h)

	for _, path := range []string{"/v1/operator/me/nodes", "/v1/operator/me/credits", "/v1/operator/me/evidence"} {
		t.Run(path, func(t *testing.T) {
			h := h.in(t)
			for _, tt := range []struct {
				header string
				status int
				code   string
			}{
				{"", 401, "NO_SESSION"},
				{"Bearer " + base58.Encode(make([]byte, 32)), 401, "NO_SESSION"},
				{"Bearer", 401, "NO_SESSION"},
				{"Bearer ", 401, "NO_SESSION"},
				{"Basic " + token, 401, "NO_SESSION"},
				{token, 401, "NO_SESSION"},
				{"Bearer " + token + "x", 401, "NO_SESSION"},
				{"Bearer " + token, 200, ""},
				{"bearer " + token, 200, ""},
				{"BEARER   " + token, 200, ""},
			} {
				if status, code := h.withHeader("GET", path, tt.header); status != tt.status || code != tt.code {
					t.Errorf("Authorization %q: %d %s, want %d %s", tt.header, status, code, tt.status, tt.code)
				}
			}
			h.fails("POST", path, nil, token, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		})
	}

	// The first two sessions were issued ten minutes before the third.
	h.clock.Advance(3600*time.Second - 10*time.Minute - time.Second)
	h.ok("GET", "/v1/operator/me/credits", nil, token, nil)
	h.clock.Advance(time.Second)
	for _, path := range []string{"/v1/operator/me/nodes", "/v1/operator/me/credits", "/v1/operator/me/evidence"} {
		h.fails("GET", path, nil, token, http.StatusUnauthorized, "SESSION_EXPIRED")
		h.fails("GET", path, nil, expired, http.StatusUnauthorized, "SESSION_EXPIRED")
		h.ok("GET", path, nil, fresh, nil)
	}
	h.clock.Advance(10 * time.Minute)
	h.fails("GET", "/v1/operator/me/nodes", nil, fresh, http.StatusUnauthorized, "SESSION_EXPIRED")
}

func TestOperatorViewBodies(t *testing.T) {
	h, op, token := newLoggedIn(t)

	_, raw := h.do("GET", "/v1/operator/me/nodes", nil, token)
	if want := `{"operator_did":"` + op.did + `","count":0,"nodes":[]}` + "\n"; string(raw) != want {
		t.Fatalf("/me/nodes: %s, want %s", raw, want)
	}

	var credits map[string]any
	h.ok("GET", "/v1/operator/me/credits", nil, token, &credits)
	want := []string{"disclaimer", "estimated", "operator_did", "pending", "settled", "source", "unit"}
	if d := cmp.Diff(want, sortedKeys(credits)); d != "" {
		t.Fatalf("credits fields (-want +got):\n%s", d)
	}
	if credits["operator_did"] != op.did || credits["unit"] != "test-credit" || credits["source"] != "not_yet_wired" {
		t.Fatalf("credits: %v", credits)
	}
	disclaimer, _ := credits["disclaimer"].(string)
	for _, s := range []string{"test unit", "not cash", "not redeemable", "not convertible", "not a claim on future value"} {
		if !strings.Contains(disclaimer, s) {
			t.Errorf("disclaimer %q does not say %q", disclaimer, s)
		}
	}
	meanings := map[string]bool{}
	for _, bucket := range []string{"settled", "pending", "estimated"} {
		b, _ := credits[bucket].(map[string]any)
		if len(b) != 2 || b["amount"] != float64(0) {
			t.Errorf("%s: %v, want {amount: 0, meaning}", bucket, b)
		}
		m, _ := b["meaning"].(string)
		if m == "" || meanings[m] {
			t.Errorf("%s: meaning %q is empty or repeated", bucket, m)
		}
		meanings[m] = true
	}
	for _, word := range []string{"settlement", "may never settle", "not a commitment or a forecast"} {
		found := false
		for m := range meanings {
			found = found || strings.Contains(m, word)
		}
		if !found {
			t.Errorf("no meaning says %q: %v", word, meanings)
		}
	}

	_, raw = h.do("GET", "/v1/operator/me/evidence", nil, token)
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev) != 5 || ev["operator_did"] != op.did || ev["count"] != float64(0) || ev["source"] != "not_yet_wired" || !strings.Contains(string(raw), `"evidence":[]`) {
		t.Fatalf("evidence: %s", raw)
	}
	if note, _ := ev["note"].(string); !strings.Contains(note, "unknown") {
		t.Fatalf("evidence note %q does not say an empty list means unknown", note)
	}
}

// TestOperatorNodesEntries: a bound node is found by key whatever DID spelling it
// registers under; it is offline with null fields until it has a record, and online_within
// moves the window, down to 0.
func TestOperatorNodesEntries(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	op := newOperator(t, "op", h.now(), "nodes.bind")
	token := op.login(h)

	// The binding is made under the full DID; the node has no record yet.
	ini := n.initiate(t, "bs-1", h.now(), nil, nil)
	ini.NodeDID = n.fullDID()
	var ir api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.resignInitiate(t, ini), "", &ir)
	var view api.ResolveView
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ir.ShortCode}, token, &view)
	if view.NodeDID != n.fullDID() {
		t.Fatalf("view %+v", view)
	}
	h.ok("POST", "/v1/bindings/authorize", op.authorize(t, view, h.now(), nil, num(3)), token, nil)
	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	h.ok("POST", "/v1/node/bindings/bs-1/accept", n.acceptance(t, pend.Pending[0], true, h.now()), "", nil)

	_, raw := h.do("GET", "/v1/operator/me/nodes", nil, token)
	want := `{"operator_did":"` + op.did + `","count":1,"nodes":[{"node_did":"` + n.fullDID() + `","binding_session_id":"bs-1","online":false,"last_seen":null,"endpoint":null,"region":null,"capabilities":[],` +
		`"authorization":{"task_types":["inference"],"single_limit":null,"daily_limit":3,"revocation_id":"authz-bs-1","activated_at":"` + stamp(h.now()) + `"}}]}` + "\n"
	if string(raw) != want {
		t.Fatalf("unregistered bound node:\n%s\nwant\n%s", raw, want)
	}

	// The node registers under its short DID: found by key.
	h.clock.Advance(time.Minute)
	reg := api.RegisterRequest{DID: n.did, PublicKey: n.key.Hex(), Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}, Region: "eu-west"}
	reg.Signature = signedReg(t, n, reg)
	h.ok("POST", "/api/v1/register", reg, "", nil)
	seen := stamp(h.now())
	for _, tt := range []struct {
		query  string
		after  time.Duration
		online bool
	}{
		{"", 0, true},
		{"?online_within=0", 0, true},
		{"?online_within=0", time.Second, false},
		{"?online_within=1", 0, true},
		{"", 599 * time.Second, true}, // seen exactly 600 s ago
		{"", time.Second, false},
		{"?online_within=601", 0, true},
		{"?online_within=600", 0, false},
		{"?online_within=86400", 0, true},
	} {
		h.clock.Advance(tt.after)
		var mine api.OperatorNodes
		h.ok("GET", "/v1/operator/me/nodes"+tt.query, nil, token, &mine)
		e := mine.Nodes[0]
		if e.Online != tt.online || e.LastSeen == nil || *e.LastSeen != seen || e.Endpoint == nil || *e.Endpoint != "203.0.113.7:7000" ||
			e.Region == nil || *e.Region != "eu-west" || !cmp.Equal(e.Capabilities, []string{"inference"}) || e.NodeDID != n.fullDID() {
			t.Fatalf("%s, %s after registering: %+v, want online=%v", tt.query, h.now().Sub(epoch), e, tt.online)
		}
	}
	for _, q := range []string{"online_within=x", "online_within=-5", "callable=7"} {
		h.fails("GET", "/v1/operator/me/nodes?"+q, nil, token, http.StatusBadRequest, "BAD_REQUEST")
	}
}
