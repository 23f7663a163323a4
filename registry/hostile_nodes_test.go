package registry_test

import (
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

func hostileDiscovery(t *testing.T, w *arena) []*hostileEndpoint {
	var eps []*hostileEndpoint
	for _, p := range []string{"/nodes", "/peers", "/api/v1/peers"} {
		ep := &hostileEndpoint{name: p, method: "GET", path: p}
		for what, q := range map[string]string{
			"online-word": "online_within=soon", "online-negative": "online_within=-1", "online-fraction": "online_within=1.5",
			"online-huge": "online_within=99999999999999", "online-hex": "online_within=0x10", "online-empty-sign": "online_within=-",
			"callable-word": "callable=yes", "callable-2": "callable=2",
		} {
			ep.extra = append(ep.extra, hostileCase{name: what, path: p + "?" + q, want: refused.badRequest})
		}
		ep.extra = append(ep.extra, hostileCase{name: "post", method: "POST", want: refused.methodNotAllowed})
		eps = append(eps, ep)
	}
	eps = append(eps, &hostileEndpoint{name: "/health", method: "GET", path: "/health", extra: []hostileCase{
		{name: "post", method: "POST", want: refused.methodNotAllowed},
		{name: "delete", method: "DELETE", want: refused.methodNotAllowed},
	}})
	return eps
}

func hostileRegister(t *testing.T, w *arena) []*hostileEndpoint {
	n := w.n
	ep := &hostileEndpoint{name: "register", method: "POST", path: "/api/v1/register"}
	// The valid request re-registers a node whose record verified, so a registration that
	// does not verify is refused rather than recorded in grace mode.
	ep.valid = func() jsonTree { return toTree(t, n.registration(t, "203.0.113.7:7000")) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "", "signature", changed, n.priv, func(req api.RegisterRequest) canonical.Message {
			key, ok := hostileBase58(req.PublicKey)
			if !ok {
				return nil
			}
			return canonical.Register{DID: req.DID, PublicKey: key, Endpoint: req.Endpoint, Capabilities: req.Capabilities, Region: req.Region}
		})
	}
	ep.fields = []hostileField{
		{path: []string{"did"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"public_key"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"endpoint"}, kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		{path: []string{"capabilities"}, kind: fkList},
		{path: []string{"region"}, kind: fkString, ctrl: refused.badRequest, text: true},
		{path: []string{"signature"}, kind: fkString, ctrl: refused.badSignature},
	}
	for _, d := range testkit.DIDs(t).Negative {
		if d.Role != "node" {
			continue
		}
		body := map[string]any{"did": d.DID, "public_key": d.PublicKey, "endpoint": "203.0.113.9:7000", "capabilities": []string{"inference"}}
		ep.extra = append(ep.extra, hostileCase{name: "dids.json/" + d.ID, want: hostileAnswer{d.Expected.HTTP, d.Expected.Code},
			body: func() []byte { return toTree(t, body).encode(t, "") }})
	}
	other := newNode(t, "other")
	for what, v := range map[string]any{
		"key-of-another-node": other.key.Hex(), "key-31-bytes": n.key.Hex()[:62], "key-garbage": "not-a-key",
		"key-0x": "0x" + n.key.Hex(), "key-upper-hex": strings.ToUpper(n.key.Hex()), "key-empty": "",
	} {
		ep.extra = append(ep.extra, ep.mutate(t, "public_key/"+what, []string{"public_key"}, v, "", refused.idBindingFailed))
	}
	for what, v := range map[string]any{
		"operator-did": w.op.did, "other-method": "did:web:example.com", "other-node": other.did,
		"upper-hex": upperHexDID(n.did), "upper-method": strings.ToUpper(n.did), "tagged-full": "did:svrp:n:" + n.key.Hex(),
	} {
		want := refused.idBindingFailed
		if what == "other-method" || what == "upper-method" {
			want = refused.idBindingNeeded
		}
		ep.extra = append(ep.extra, ep.mutate(t, "did/"+what, []string{"did"}, v, "", want))
	}
	otherSig := sign(t, other.priv, canonical.Register{DID: n.did, PublicKey: n.key.Base58(), Endpoint: "203.0.113.7:7000", Capabilities: []string{"inference"}, Region: "eu-west"})
	for what, v := range map[string]any{
		"missing": hostileDeleted{}, "null": nil, "empty": "", "not-base58": "0OIl!", "short": base58.Encode(make([]byte, 63)),
		"long": base58.Encode(make([]byte, 65)), "zero": base58.Encode(make([]byte, 64)), "by-another-key": otherSig,
		"over-another-message": sign(t, n.priv, canonical.Heartbeat{DID: n.did, TS: w.now().Unix()}),
	} {
		ep.extra = append(ep.extra, ep.mutate(t, "signature/"+what, []string{"signature"}, v, "", refused.badSignature))
	}
	for what, v := range map[string]string{
		"nbsp": "203.0.113.7:7000\u00a0", "nel": "203.0.113.7\u0085:7000", "ideographic": "\u3000203.0.113.7:7000",
		"line-separator": "203.0.113.7:7000\u2028", "paragraph-separator": "203.0.113.7\u2029:7000", "thin-space": "203.0.113.7\u2009:7000",
	} {
		ep.extra = append(ep.extra, ep.mutate(t, "endpoint/whitespace/"+what, []string{"endpoint"}, v, "", refused.badRequest))
	}
	// A short DID whose body another key already holds.
	pair := testkit.DIDs(t).Collision
	first, second := pair.First, pair.Second
	if first.DIDShort == "" || first.DIDShort != second.DIDShort {
		t.Fatalf("dids.json collision: %+v", pair)
	}
	w.ok("POST", "/api/v1/register", map[string]any{"did": first.DIDShort, "public_key": first.PublicKeyB58, "endpoint": "198.51.100.1:7000"}, "", nil)
	ep.extra = append(ep.extra, hostileCase{name: "did/short-body-held-by-another-key", want: refused.didCollision, body: func() []byte {
		return toTree(t, map[string]any{"did": second.DIDShort, "public_key": second.PublicKeyB58, "endpoint": "198.51.100.2:7000"}).encode(t, "")
	}})
	ep.succeed = func(t *testing.T) { w.ok("POST", "/api/v1/register", ep.valid(), "", nil) }
	return []*hostileEndpoint{ep}
}

func hostileHeartbeat(t *testing.T, w *arena) []*hostileEndpoint {
	n := w.n
	ep := &hostileEndpoint{name: "heartbeat", method: "POST", path: "/api/v1/heartbeat"}
	ep.valid = func() jsonTree {
		b := toTree(t, n.heartbeat(t, n.did, w.now()))
		b["public_key"] = n.key.Base58()
		return b
	}
	ep.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "", "signature", changed, n.priv, func(req api.HeartbeatRequest) canonical.Message {
			return canonical.Heartbeat{DID: req.DID, TS: req.TS}
		})
	}
	ep.fields = []hostileField{
		{path: []string{"did"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"ts"}, kind: fkInteger, required: true},
		{path: []string{"signature"}, kind: fkString, required: true, ctrl: refused.badSignature},
		{path: []string{"public_key"}, kind: fkString, ctrl: refused.idBindingFailed},
	}
	stranger := newNode(t, "never-registered")
	now := w.now().Unix()
	ep.addEdits(t, map[string]hostileEdit{
		"did/other-method":         {[]string{"did"}, "did:key:z6Mk", refused.idBindingNeeded},
		"did/operator":             {[]string{"did"}, w.op.did, refused.idBindingFailed},
		"did/upper-hex":            {[]string{"did"}, upperHexDID(n.did), refused.idBindingFailed},
		"did/upper-method":         {[]string{"did"}, strings.ToUpper(n.did), refused.idBindingNeeded},
		"did/9-hex":                {[]string{"did"}, n.did + "0", refused.idBindingFailed},
		"public_key/another-key":   {[]string{"public_key"}, stranger.key.Base58(), refused.idBindingFailed},
		"public_key/garbage":       {[]string{"public_key"}, "zzzz", refused.idBindingFailed},
		"ts/301s-ahead":            {[]string{"ts"}, now + 301, refused.staleTS},
		"ts/301s-behind":           {[]string{"ts"}, now - 301, refused.staleTS},
		"ts/zero":                  {[]string{"ts"}, 0, refused.staleTS},
		"ts/min-int64":             {[]string{"ts"}, json.Number("-9223372036854775808"), refused.staleTS},
		"ts/max-int64":             {[]string{"ts"}, json.Number("9223372036854775807"), refused.staleTS},
		"ts/milliseconds":          {[]string{"ts"}, now * 1000, refused.staleTS},
		"signature/empty":          {[]string{"signature"}, "", refused.badSignature},
		"signature/garbage":        {[]string{"signature"}, "0OIl", refused.badSignature},
		"signature/zero":           {[]string{"signature"}, base58.Encode(make([]byte, 64)), refused.badSignature},
		"signature/by-another-key": {[]string{"signature"}, sign(t, stranger.priv, canonical.Heartbeat{DID: n.did, TS: now}), refused.badSignature},
		"signature/poll-message":   {[]string{"signature"}, sign(t, n.priv, canonical.Poll{NodeDID: n.did, TS: now}), refused.badSignature},
	})
	ep.extra = append(ep.extra, hostileCase{name: "did/never-registered", want: refused.unknownDID, body: func() []byte {
		return toTree(t, stranger.heartbeat(t, stranger.did, w.now())).encode(t, "")
	}})
	ep.succeed = func(t *testing.T) { w.ok("POST", "/api/v1/heartbeat", ep.valid(), "", nil) }
	return []*hostileEndpoint{ep}
}

func hostileChallenge(t *testing.T, w *arena) []*hostileEndpoint {
	return []*hostileEndpoint{{name: "challenge", method: "POST", path: "/v1/auth/challenge", extra: []hostileCase{
		{name: "body/64KiB+1", want: refused.tooLarge, body: func() []byte { return []byte(strings.Repeat("{", httpapi.MaxBodyBytes+1)) }},
		{name: "get", method: "GET", want: refused.methodNotAllowed},
	}, succeed: func(t *testing.T) {
		// Any body within the limit is ignored.
		w.ok("POST", "/v1/auth/challenge", "not json at all", "", nil)
	}}}
}

// hostileCredentialFields are the DeviceCredential's fields wherever it travels (under prefix).
func hostileCredentialFields(prefix string) []hostileField {
	p := func(f string) []string { return []string{prefix, f} }
	return []hostileField{
		{path: []string{prefix}, kind: fkObject, required: true},
		{path: p("credential_id"), kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		{path: p("operator_did"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: p("operator_root_public_key"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: p("device_id"), kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		{path: p("device_public_key"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: p("permissions"), kind: fkList},
		{path: p("issued_at"), kind: fkString, required: true, ctrl: refused.badRequest, time: refused.dcExpired},
		{path: p("expires_at"), kind: fkString, required: true, ctrl: refused.badRequest, time: refused.dcExpired},
		{path: p("revocation_id"), kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		{path: p("signature"), kind: fkString, required: true, ctrl: refused.dcBadSignature},
	}
}

// hostileResignCredential signs the credential under b[prefix] again with op's root key, unless
// the change was to that signature.
func hostileResignCredential(t *testing.T, op operator, b jsonTree, prefix string, changed []string) {
	hostileResign(t, b, prefix, "signature", changed, op.root, func(dc authn.DeviceCredential) canonical.Message { return dc.DeviceCredential })
}

// hostileResign signs again, with priv, the object under b[in] (the body itself when in is
// ""), over the message signed takes from it read as a T, and writes the signature into the
// object's field sigField: unless the change was to that signature, or signed finds no
// message to sign (nil), or the message breaks the rendering rules and so has no bytes to
// sign.
func hostileResign[T any](t *testing.T, b jsonTree, in, sigField string, changed []string, priv ed25519.PrivateKey, signed func(T) canonical.Message) {
	obj, sigPath := map[string]any(b), []string{sigField}
	if in != "" {
		m, ok := b[in].(map[string]any)
		if !ok {
			return
		}
		obj, sigPath = m, []string{in, sigField}
	}
	if slices.Equal(changed, sigPath) {
		return
	}
	v, ok := hostileDecode[T](t, jsonTree(obj))
	if !ok {
		return
	}
	if m := signed(v); m != nil {
		if _, err := m.Bytes(canonical.DefaultPrefix); err == nil {
			obj[sigField] = sign(t, priv, m)
		}
	}
}

// hostileCredentialCases are the refusals of a DeviceCredential's content, the same at login and
// at authorize.
func hostileCredentialCases(t *testing.T, w *arena, ep *hostileEndpoint, prefix string, didWant *hostileAnswer) []hostileCase {
	p := func(f string) []string { return []string{prefix, f} }
	var cs []hostileCase
	for _, d := range testkit.DIDs(t).Negative {
		if d.Role != "operator" {
			continue
		}
		want := hostileAnswer{d.Expected.HTTP, d.Expected.Code}
		if didWant != nil {
			want = *didWant
		}
		cs = append(cs, hostileCase{name: "dids.json/" + d.ID, want: want, body: func() []byte {
			b := ep.valid()
			b.set(p("operator_did"), d.DID)
			b.set(p("operator_root_public_key"), d.PublicKey)
			ep.resign(b, p("operator_did"))
			return b.encode(t, "")
		}})
	}
	now := w.now()
	for what, c := range map[string]struct {
		field string
		v     any
		want  hostileAnswer
	}{
		"root-key/garbage":            {"operator_root_public_key", "zzzz", refused.dcIDBinding},
		"root-key/device-key":         {"operator_root_public_key", w.op.cred.DevicePublicKey, refused.dcIDBinding},
		"signature/garbage":           {"signature", "0OIl", refused.dcBadSignature},
		"signature/empty":             {"signature", "", refused.dcBadSignature},
		"signature/zero":              {"signature", base58.Encode(make([]byte, 64)), refused.dcBadSignature},
		"signature/by-device-key":     {"signature", sign(t, w.op.device, w.op.cred.DeviceCredential), refused.dcBadSignature},
		"expires_at/6s-ago":           {"expires_at", canonical.FormatTime(now.Add(-6 * time.Second)), refused.dcExpired},
		"issued_at/6s-ahead":          {"issued_at", canonical.FormatTime(now.Add(6 * time.Second)), refused.dcExpired},
		"expires_at/before-issued_at": {"expires_at", canonical.FormatTime(now.Add(-2 * time.Hour)), refused.dcExpired},
	} {
		cs = append(cs, ep.mutate(t, "credential/"+what, p(c.field), c.v, "", c.want))
	}
	return cs
}

func hostileLogin(t *testing.T, w *arena) []*hostileEndpoint {
	op := w.op
	ep := &hostileEndpoint{name: "device-login", method: "POST", path: "/v1/auth/device-login"}
	ep.valid = func() jsonTree { return toTree(t, op.loginRequest(t, w.challenge(), w.now())) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResignCredential(t, op, b, "device_credential", changed)
		hostileResign(t, b, "", "signature", changed, op.device, func(l authn.Login) canonical.Message {
			return canonical.Login{OperatorDID: l.DeviceCredential.OperatorDID, DevicePublicKey: l.DeviceCredential.DevicePublicKey, Challenge: l.Challenge, IssuedAt: l.IssuedAt}
		})
	}
	ep.fields = append(hostileCredentialFields("device_credential"),
		hostileField{path: []string{"challenge"}, kind: fkString, required: true, ctrl: refused.badChallenge},
		hostileField{path: []string{"issued_at"}, kind: fkString, required: true, ctrl: refused.badSignature, time: refused.badSignature},
		hostileField{path: []string{"signature"}, kind: fkString, required: true, ctrl: refused.badSignature},
	)
	ep.extra = hostileCredentialCases(t, w, ep, "device_credential", nil)
	used := w.challenge()
	w.ok("POST", "/v1/auth/device-login", op.loginRequest(t, used, w.now()), "", nil)
	other := newOperator(t, "other", w.now(), "nodes.bind")
	ep.addEdits(t, map[string]hostileEdit{
		"challenge/already-used":     {[]string{"challenge"}, used, refused.badChallenge},
		"challenge/never-issued":     {[]string{"challenge"}, base58.Encode(make([]byte, 24)), refused.badChallenge},
		"challenge/empty":            {[]string{"challenge"}, "", refused.badChallenge},
		"challenge/long":             {[]string{"challenge"}, strings.Repeat("2", 4096), refused.badChallenge},
		"challenge/not-base58":       {[]string{"challenge"}, "0OIl0OIl", refused.badChallenge},
		"signature/garbage":          {[]string{"signature"}, "0OIl", refused.badSignature},
		"signature/empty":            {[]string{"signature"}, "", refused.badSignature},
		"signature/by-root-key":      {[]string{"signature"}, sign(t, op.root, canonical.Login{OperatorDID: op.did, DevicePublicKey: op.cred.DevicePublicKey, Challenge: used, IssuedAt: canonical.FormatTime(w.now())}), refused.badSignature},
		"device-key/not-a-key":       {[]string{"device_credential", "device_public_key"}, "zzzz", refused.dcIDBinding},
		"device-key/another-device":  {[]string{"device_credential", "device_public_key"}, other.cred.DevicePublicKey, refused.badSignature},
		"credential/another-op-root": {[]string{"device_credential", "operator_root_public_key"}, other.cred.OperatorRootPublicKey, refused.dcIDBinding},
	})
	ep.succeed = func(t *testing.T) { w.ok("POST", "/v1/auth/device-login", ep.valid(), "", nil) }
	return []*hostileEndpoint{ep}
}

// hostileBearerCases are the refusals of a missing or unknown bearer on an endpoint that needs
// one; token is a valid one, which only the right scheme and the exact text may present.
func hostileBearerCases(token string) []hostileCase {
	var cs []hostileCase
	for what, h := range map[string]string{
		"unknown-token": "Bearer 5Hue3ZkV6Fqj5nXkz9uQ2xWv8aJhLmRpT4sYcGdE1bNo", "long-token": "Bearer " + strings.Repeat("a", 300),
		"padding-only": "Bearer ====", "odd-chars": "Bearer tok*en", "quoted": `Bearer "` + token + `"`,
		"scheme-only": "Bearer", "other-scheme": "Token " + token, "basic": "Basic dXNlcjpwYXNz",
		"token-only": token, "token-plus-one": "Bearer " + token + "x", "token-cut": "Bearer " + token[:len(token)-1],
		"two-tokens": "Bearer " + token + " " + token, "no-space": "Bearer" + token,
	} {
		cs = append(cs, hostileCase{name: "bearer/" + what, header: h, want: refused.noSession})
	}
	cs = append(cs, hostileCase{name: "bearer/none", noBearer: true, want: refused.noSession})
	return cs
}
