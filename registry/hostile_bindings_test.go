package registry_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
)

func hostileOperatorViews(t *testing.T, w *arena) []*hostileEndpoint {
	var eps []*hostileEndpoint
	for _, p := range []string{"/v1/operator/me/nodes", "/v1/operator/me/credits", "/v1/operator/me/evidence"} {
		ep := &hostileEndpoint{name: p, method: "GET", path: p, bearer: w.token, extra: hostileBearerCases(w.token)}
		ep.extra = append(ep.extra, hostileCase{name: "post", method: "POST", want: refused.methodNotAllowed})
		eps = append(eps, ep)
	}
	eps[0].extra = append(eps[0].extra,
		hostileCase{name: "online-word", path: "/v1/operator/me/nodes?online_within=soon", want: refused.badRequest},
		hostileCase{name: "online-negative", path: "/v1/operator/me/nodes?online_within=-5", want: refused.badRequest},
	)
	return eps
}

func hostileInitiate(t *testing.T, w *arena) []*hostileEndpoint {
	n := w.n
	w.drive(w.n, w.op, w.token, "bs-taken", "INITIATED")
	ep := &hostileEndpoint{name: "initiate", method: "POST", path: "/v1/bindings/initiate"}
	ep.valid = func() jsonTree { return toTree(t, n.initiate(t, "bs-new", w.now(), num(10), num(100))) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "", "node_signature", changed, n.priv, func(req binding.InitiateRequest) canonical.Message {
			m := req.BindingSession
			if key, ok := hostileBase58(m.NodePublicKey); ok {
				m.NodePublicKey = key
			}
			return m
		})
	}
	ep.fields = []hostileField{
		{path: []string{"binding_session_id"}, kind: fkString, required: true, ctrl: refused.badRequest, id: true},
		{path: []string{"node_did"}, kind: fkString, required: true, ctrl: refused.badRequest},
		{path: []string{"node_public_key"}, kind: fkString, required: true, ctrl: refused.badRequest},
		{path: []string{"device_summary"}, kind: fkString, ctrl: refused.badRequest, text: true},
		{path: []string{"os"}, kind: fkString, ctrl: refused.badRequest, text: true},
		{path: []string{"region"}, kind: fkString, ctrl: refused.badRequest, text: true},
		{path: []string{"requested_task_types"}, kind: fkList},
		{path: []string{"requested_single_limit"}, kind: fkNumber},
		{path: []string{"requested_daily_limit"}, kind: fkNumber},
		{path: []string{"nonce"}, kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		{path: []string{"created_at"}, kind: fkString, required: true, ctrl: refused.badRequest, time: refused.badRequest},
		{path: []string{"expires_at"}, kind: fkString, required: true, ctrl: refused.badRequest, time: refused.badRequest},
		{path: []string{"node_signature"}, kind: fkString, required: true, ctrl: refused.badSignature},
	}
	other := newNode(t, "other")
	now := w.now()
	ts := canonical.FormatTime
	for what, c := range map[string]struct {
		set  map[string]any
		want hostileAnswer
	}{
		"did/other-method":            {map[string]any{"node_did": "did:web:example.com"}, refused.idBindingNeeded},
		"did/operator":                {map[string]any{"node_did": w.op.did}, refused.idBindingFailed},
		"did/another-node":            {map[string]any{"node_did": other.did}, refused.idBindingFailed},
		"did/upper-hex":               {map[string]any{"node_did": upperHexDID(n.did)}, refused.idBindingFailed},
		"key/another-node":            {map[string]any{"node_public_key": other.key.Base58()}, refused.idBindingFailed},
		"key/garbage":                 {map[string]any{"node_public_key": "zzzz"}, refused.idBindingFailed},
		"key/empty":                   {map[string]any{"node_public_key": ""}, refused.idBindingFailed},
		"ttl/zero":                    {map[string]any{"expires_at": ts(now)}, refused.ttlTooLong},
		"ttl/601s":                    {map[string]any{"expires_at": ts(now.Add(601 * time.Second))}, refused.ttlTooLong},
		"ttl/negative":                {map[string]any{"expires_at": ts(now.Add(-time.Second))}, refused.ttlTooLong},
		"ttl/a-year":                  {map[string]any{"expires_at": ts(now.Add(365 * 24 * time.Hour))}, refused.ttlTooLong},
		"expired":                     {map[string]any{"created_at": ts(now.Add(-11 * time.Minute)), "expires_at": ts(now.Add(-time.Minute))}, refused.alreadyExpired},
		"expires-now":                 {map[string]any{"created_at": ts(now.Add(-5 * time.Minute)), "expires_at": ts(now)}, refused.alreadyExpired},
		"post-dated":                  {map[string]any{"created_at": ts(now.Add(301 * time.Second)), "expires_at": ts(now.Add(601 * time.Second))}, refused.badRequest},
		"id/already-used":             {map[string]any{"binding_session_id": "bs-taken"}, refused.sessionExists},
		"signature/garbage":           {map[string]any{"node_signature": "0OIl"}, refused.badSignature},
		"signature/empty":             {map[string]any{"node_signature": ""}, refused.badSignature},
		"signature/zero":              {map[string]any{"node_signature": base58.Encode(make([]byte, 64))}, refused.badSignature},
		"signature/by-another-key":    {map[string]any{"node_signature": sign(t, other.priv, n.initiate(t, "bs-new", now, num(10), num(100)).BindingSession)}, refused.badSignature},
		"signature/over-another-id":   {map[string]any{"node_signature": n.initiate(t, "bs-other", now, num(10), num(100)).NodeSignature}, refused.badSignature},
		"signature/over-other-limits": {map[string]any{"node_signature": n.initiate(t, "bs-new", now, num(1000), num(100)).NodeSignature}, refused.badSignature},
	} {
		c := c
		mc := hostileCase{name: what, want: c.want, body: func() []byte {
			b := ep.valid()
			var changed []string
			for k, v := range c.set {
				b[k] = v
				changed = []string{k}
			}
			ep.resign(b, changed)
			return b.encode(t, "")
		}}
		ep.extra = append(ep.extra, mc)
	}
	ep.succeed = func(t *testing.T) { w.ok("POST", "/v1/bindings/initiate", ep.valid(), "", nil) }
	return []*hostileEndpoint{ep}
}

func hostileResolve(t *testing.T, w *arena) []*hostileEndpoint {
	ini := w.drive(w.n, w.op, w.token, "bs-open", "INITIATED").ini
	used := w.drive(w.n, w.op, w.token, "bs-used", "INITIATED").ini
	w.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: used.ShortCode}, w.token, nil)
	cancelled := w.drive(w.n, w.op, w.token, "bs-cancelled", "INITIATED").ini
	w.ok("POST", "/v1/bindings/bs-cancelled/cancel", w.n.cancelRequest(t, "bs-cancelled", w.n.did, w.now()), "", nil)
	ep := &hostileEndpoint{name: "resolve", method: "POST", path: "/v1/bindings/resolve", bearer: w.token}
	ep.valid = func() jsonTree { return toTree(t, api.ResolveRequest{ShortCode: ini.ShortCode}) }
	ep.fields = []hostileField{
		// A short code is only ever hashed: any string is a code that is not found.
		{path: []string{"short_code"}, kind: fkString, required: true, ctrl: refused.notFound},
		{path: []string{"binding_token"}, kind: fkString},
	}
	ep.extra = hostileBearerCases(w.token)
	for what, v := range map[string]any{
		"short_code/never-issued": "ZZZZZZZZ", "short_code/lowercase-never-issued": "zzzz-zzzz",
		"short_code/already-used": used.ShortCode, "short_code/cancelled-session": cancelled.ShortCode,
		"short_code/10KiB": strings.Repeat("Z", 10<<10), "short_code/one-off": ini.ShortCode[:7] + hostileNextSymbol(ini.ShortCode[7]),
	} {
		mc := ep.mutate(t, what, []string{"short_code"}, v, "", refused.notFound)
		mc.countsFailures = true
		ep.extra = append(ep.extra, mc)
	}
	for what, v := range map[string]any{
		"binding_token/never-issued": base58.Encode(make([]byte, 16)), "binding_token/already-used": used.BindingToken,
		"binding_token/lowercased": strings.ToLower(ini.BindingToken),
	} {
		mc := hostileCase{name: what, want: refused.notFound, countsFailures: true, body: func() []byte {
			return toTree(t, map[string]any{"binding_token": v}).encode(t, "")
		}}
		ep.extra = append(ep.extra, mc)
	}
	for what, raw := range map[string]string{
		"empty-code": `{"short_code":""}`, "empty-token": `{"binding_token":""}`, "both-empty": `{"short_code":"","binding_token":""}`,
		"both-null": `{"short_code":null,"binding_token":null}`, "other-field": `{"code":"ZZZZZZZZ"}`,
	} {
		ep.extra = append(ep.extra, hostileCase{name: "no-secret/" + what, want: refused.badRequest, body: func() []byte { return []byte(raw) }})
	}
	ep.succeed = func(t *testing.T) { w.ok("POST", "/v1/bindings/resolve", ep.valid(), w.token, nil) }
	return []*hostileEndpoint{ep}
}

// upperHexDID spells a short DID's body in upper case, which the grammar refuses.
func upperHexDID(did string) string {
	i := strings.LastIndexByte(did, ':')
	return did[:i+1] + strings.ToUpper(did[i+1:])
}

// hostileNextSymbol is the code symbol after c, so a code one symbol off its real value.
func hostileNextSymbol(c byte) string {
	i := strings.IndexByte(binding.ShortCodeAlphabet, c)
	return string(binding.ShortCodeAlphabet[(i+1)%len(binding.ShortCodeAlphabet)])
}

func hostileAuthorize(t *testing.T, w *arena) []*hostileEndpoint {
	op := w.op
	view := w.drive(w.n, w.op, w.token, "bs-az", "PENDING_OPERATOR").view
	w.drive(w.n, w.op, w.token, "bs-az-initiated", "INITIATED")
	other := newOperator(t, "other", w.now(), "nodes.bind")
	otherToken := other.login(w.harness)
	ep := &hostileEndpoint{name: "authorize", method: "POST", path: "/v1/bindings/authorize", bearer: w.token}
	ep.valid = func() jsonTree { return toTree(t, op.authorize(t, view, w.now(), num(5), num(50))) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResignCredential(t, op, b, "device_credential", changed)
		hostileResign(t, b, "authorization_credential", "signature", changed, op.device, func(az binding.AuthorizationCredential) canonical.Message { return az.Authorization })
	}
	az := func(f string) []string { return []string{"authorization_credential", f} }
	ep.fields = append([]hostileField{
		// Not a signed field: any string is an id that names no session.
		{path: []string{"binding_session_id"}, kind: fkString, required: true, ctrl: refused.notFound},
	}, hostileCredentialFields("device_credential")...)
	ep.fields = append(ep.fields,
		hostileField{path: []string{"authorization_credential"}, kind: fkObject, required: true},
		hostileField{path: az("binding_session_id"), kind: fkString, required: true, ctrl: refused.badRequest, id: true},
		hostileField{path: az("node_did"), kind: fkString, required: true, ctrl: refused.badRequest},
		hostileField{path: az("operator_did"), kind: fkString, required: true, ctrl: refused.badRequest},
		hostileField{path: az("task_types"), kind: fkList},
		hostileField{path: az("single_limit"), kind: fkNumber},
		hostileField{path: az("daily_limit"), kind: fkNumber},
		hostileField{path: az("revocation_id"), kind: fkString, required: true, ctrl: refused.badRequest, text: true},
		hostileField{path: az("issued_at"), kind: fkString, required: true, ctrl: refused.badRequest, time: refused.badRequest},
		hostileField{path: az("expires_at"), kind: fkString, required: true, ctrl: refused.badRequest, time: refused.badRequest},
		hostileField{path: az("signature"), kind: fkString, required: true, ctrl: refused.badSignature},
	)
	// At authorize the credential must name the caller before it is judged, so a credential
	// for any other operator DID is PERMISSION_DENIED.
	ep.extra = append(hostileBearerCases(w.token), hostileCredentialCases(t, w, ep, "device_credential", &refused.permissionDenied)...)
	ep.extra = append(ep.extra, hostileCase{name: "bearer/another-operator", bearer: otherToken, want: refused.permissionDenied})
	now := w.now()
	ts := canonical.FormatTime
	ep.addEdits(t, map[string]hostileEdit{
		"session/unknown":                {[]string{"binding_session_id"}, "bs-nope", refused.notFound},
		"session/not-resolved":           {[]string{"binding_session_id"}, "bs-az-initiated", refused.badState},
		"credential/another-operator":    {[]string{"device_credential"}, map[string]any(toTree(t, other.cred)), refused.permissionDenied},
		"authorization/another-session":  {az("binding_session_id"), "bs-az-initiated", refused.badRequest},
		"authorization/another-node":     {az("node_did"), newNode(t, "x").did, refused.badRequest},
		"authorization/another-operator": {az("operator_did"), other.did, refused.badRequest},
		"authorization/full-node-did":    {az("node_did"), "did:svrp:" + strings.Repeat("0", 64), refused.badRequest},
		"authorization/sig-garbage":      {az("signature"), "0OIl", refused.badSignature},
		"authorization/sig-by-root":      {az("signature"), sign(t, op.root, op.authorize(t, view, now, num(5), num(50)).AuthorizationCredential.Authorization), refused.badSignature},
		"authorization/expired":          {az("expires_at"), ts(now.Add(-6 * time.Second)), refused.authzExpired},
		"authorization/not-yet-valid":    {az("issued_at"), ts(now.Add(6 * time.Second)), refused.authzExpired},
		"scope/task-not-requested":       {az("task_types"), []any{"inference", "mining"}, refused.scopeExceeded},
		"scope/single-over-request":      {az("single_limit"), json.Number("10.5"), refused.scopeExceeded},
		"scope/single-null-vs-cap":       {az("single_limit"), nil, refused.scopeExceeded},
	})
	// The daily limit was requested as null (no cap): any grant fits, so the valid request
	// grants 50 and this is not a refusal; covered by succeed.
	ep.succeed = func(t *testing.T) {
		var st api.StateResult
		w.ok("POST", "/v1/bindings/authorize", ep.valid(), w.token, &st)
		if st.State != "PENDING_NODE_ACCEPTANCE" {
			t.Fatalf("authorize: %+v", st)
		}
	}
	return []*hostileEndpoint{ep}
}

func hostileStatusEndpoint(t *testing.T, w *arena) []*hostileEndpoint {
	w.drive(w.n, w.op, w.token, "bs-status", "INITIATED")
	ep := &hostileEndpoint{name: "status", method: "GET", path: "/v1/bindings/bs-status/status"}
	for what, p := range map[string]string{
		"unknown": "/v1/bindings/bs-nope/status", "long-id": "/v1/bindings/" + strings.Repeat("b", 300) + "/status",
		"encoded-slash": "/v1/bindings/bs%2Fstatus/status", "encoded-nul": "/v1/bindings/bs%00/status",
		"dot-dot": "/v1/bindings/../status", "case": "/v1/bindings/BS-STATUS/status",
	} {
		ep.extra = append(ep.extra, hostileCase{name: what, path: p, want: refused.notFound})
	}
	ep.extra = append(ep.extra,
		hostileCase{name: "post", method: "POST", want: refused.methodNotAllowed},
		hostileCase{name: "put", method: "PUT", want: refused.methodNotAllowed},
	)
	ep.succeed = func(t *testing.T) { w.ok("GET", "/v1/bindings/bs-status/status", nil, "", nil) }
	return []*hostileEndpoint{ep}
}

func hostileCancels(t *testing.T, w *arena) []*hostileEndpoint {
	n := w.n
	w.drive(w.n, w.op, w.token, "bs-cancel", "INITIATED")
	w.drive(w.n, w.op, w.token, "bs-cancel-op", "PENDING_OPERATOR")
	w.drive(w.n, w.op, w.token, "bs-cancel-active", "ACTIVE")
	w.drive(w.n, w.op, w.token, "bs-cancel-done", "INITIATED")
	w.ok("POST", "/v1/bindings/bs-cancel-done/cancel", n.cancelRequest(t, "bs-cancel-done", n.did, w.now()), "", nil)
	other := newOperator(t, "other", w.now(), "nodes.bind")
	otherToken := other.login(w.harness)
	stranger := newNode(t, "stranger")

	byNode := &hostileEndpoint{name: "cancel-node", method: "POST", path: "/v1/bindings/bs-cancel/cancel"}
	byNode.valid = func() jsonTree { return toTree(t, n.cancelRequest(t, "bs-cancel", n.did, w.now())) }
	byNode.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "", "signature", changed, n.priv, func(req api.NodeCancelRequest) canonical.Message {
			return canonical.Cancel{BindingSessionID: "bs-cancel", NodeDID: req.NodeDID, TS: req.TS}
		})
	}
	byNode.fields = []hostileField{
		{path: []string{"node_did"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"ts"}, kind: fkInteger, required: true},
		{path: []string{"signature"}, kind: fkString, required: true, ctrl: refused.badSignature},
	}
	now := w.now().Unix()
	byNode.addEdits(t, map[string]hostileEdit{
		"did/other-method":         {[]string{"node_did"}, "did:web:example.com", refused.idBindingNeeded},
		"did/operator":             {[]string{"node_did"}, w.op.did, refused.idBindingFailed},
		"did/another-node":         {[]string{"node_did"}, stranger.did, refused.permissionDenied},
		"ts/stale":                 {[]string{"ts"}, now - 301, refused.staleTS},
		"ts/min-int64":             {[]string{"ts"}, json.Number("-9223372036854775808"), refused.staleTS},
		"signature/garbage":        {[]string{"signature"}, "0OIl", refused.badSignature},
		"signature/by-another-key": {[]string{"signature"}, sign(t, stranger.priv, canonical.Cancel{BindingSessionID: "bs-cancel", NodeDID: n.did, TS: now}), refused.badSignature},
		"signature/over-other-id":  {[]string{"signature"}, n.cancelRequest(t, "bs-cancel-op", n.did, w.now()).Signature, refused.badSignature},
	})
	for what, c := range map[string]struct {
		id   string
		want hostileAnswer
	}{"unknown": {"bs-nope", refused.notFound}, "active": {"bs-cancel-active", refused.alreadyActive}, "cancelled": {"bs-cancel-done", refused.badState}} {
		id := c.id
		byNode.extra = append(byNode.extra, hostileCase{name: "session/" + what, path: "/v1/bindings/" + id + "/cancel", want: c.want,
			body: func() []byte { return toTree(t, n.cancelRequest(t, id, n.did, w.now())).encode(t, "") }})
	}
	byNode.succeed = func(t *testing.T) { w.ok("POST", "/v1/bindings/bs-cancel/cancel", byNode.valid(), "", nil) }

	byOperator := &hostileEndpoint{name: "cancel-operator", method: "POST", path: "/v1/bindings/bs-cancel-op/cancel", bearer: w.token}
	for _, c := range hostileBearerCases(w.token) {
		if !c.noBearer { // without a bearer it is the node form
			byOperator.extra = append(byOperator.extra, c)
		}
	}
	byOperator.extra = append(byOperator.extra,
		hostileCase{name: "another-operator", bearer: otherToken, want: refused.permissionDenied},
		hostileCase{name: "before-resolve", path: "/v1/bindings/bs-cancel/cancel", want: refused.permissionDenied},
		hostileCase{name: "unknown-before-bearer", path: "/v1/bindings/bs-nope/cancel", header: "Bearer unknown", want: refused.notFound},
		hostileCase{name: "active", path: "/v1/bindings/bs-cancel-active/cancel", want: refused.alreadyActive},
	)
	byOperator.succeed = func(t *testing.T) { w.ok("POST", "/v1/bindings/bs-cancel-op/cancel", nil, w.token, nil) }
	return []*hostileEndpoint{byNode, byOperator}
}

func hostileOperatorReject(t *testing.T, w *arena) []*hostileEndpoint {
	w.drive(w.n, w.op, w.token, "bs-orej", "PENDING_OPERATOR")
	w.drive(w.n, w.op, w.token, "bs-orej-initiated", "INITIATED")
	w.drive(w.n, w.op, w.token, "bs-orej-pna", "PENDING_NODE_ACCEPTANCE")
	w.drive(w.n, w.op, w.token, "bs-orej-active", "ACTIVE")
	other := newOperator(t, "other", w.now(), "nodes.bind")
	otherToken := other.login(w.harness)
	ep := &hostileEndpoint{name: "operator-reject", method: "POST", path: "/v1/bindings/bs-orej/reject", bearer: w.token, extra: hostileBearerCases(w.token)}
	ep.extra = append(ep.extra,
		hostileCase{name: "unknown", path: "/v1/bindings/bs-nope/reject", want: refused.notFound},
		hostileCase{name: "unknown-before-bearer", path: "/v1/bindings/bs-nope/reject", noBearer: true, want: refused.notFound},
		hostileCase{name: "another-operator", bearer: otherToken, want: refused.permissionDenied},
		hostileCase{name: "not-resolved", path: "/v1/bindings/bs-orej-initiated/reject", want: refused.permissionDenied},
		hostileCase{name: "authorized", path: "/v1/bindings/bs-orej-pna/reject", want: refused.badState},
		hostileCase{name: "active", path: "/v1/bindings/bs-orej-active/reject", want: refused.alreadyActive},
		hostileCase{name: "unknown-action", path: "/v1/bindings/bs-orej/approve", want: refused.notFound},
	)
	ep.succeed = func(t *testing.T) { w.ok("POST", "/v1/bindings/bs-orej/reject", nil, w.token, nil) }
	return []*hostileEndpoint{ep}
}

func hostilePending(t *testing.T, w *arena) []*hostileEndpoint {
	n := w.n
	ep := &hostileEndpoint{name: "pending", method: "POST", path: "/v1/node/bindings/pending"}
	ep.valid = func() jsonTree { return toTree(t, n.poll(t, w.now())) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "", "signature", changed, n.priv, func(req api.PendingRequest) canonical.Message {
			return canonical.Poll{NodeDID: req.NodeDID, TS: req.TS}
		})
	}
	ep.fields = []hostileField{
		{path: []string{"node_did"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"node_public_key"}, kind: fkString, required: true, ctrl: refused.idBindingFailed},
		{path: []string{"ts"}, kind: fkInteger, required: true},
		{path: []string{"signature"}, kind: fkString, required: true, ctrl: refused.badSignature},
	}
	stranger := newNode(t, "stranger")
	now := w.now().Unix()
	ep.addEdits(t, map[string]hostileEdit{
		"did/other-method":         {[]string{"node_did"}, "did:web:example.com", refused.idBindingNeeded},
		"did/operator":             {[]string{"node_did"}, w.op.did, refused.idBindingFailed},
		"did/another-node":         {[]string{"node_did"}, stranger.did, refused.idBindingFailed},
		"key/another-node":         {[]string{"node_public_key"}, stranger.key.Base58(), refused.idBindingFailed},
		"key/garbage":              {[]string{"node_public_key"}, "0OIl", refused.idBindingFailed},
		"ts/stale":                 {[]string{"ts"}, now + 301, refused.staleTS},
		"ts/max-int64":             {[]string{"ts"}, json.Number("9223372036854775807"), refused.staleTS},
		"signature/garbage":        {[]string{"signature"}, "0OIl", refused.badSignature},
		"signature/by-another-key": {[]string{"signature"}, sign(t, stranger.priv, canonical.Poll{NodeDID: n.did, TS: now}), refused.badSignature},
		"signature/heartbeat":      {[]string{"signature"}, sign(t, n.priv, canonical.Heartbeat{DID: n.did, TS: now}), refused.badSignature},
	})
	ep.succeed = func(t *testing.T) { w.ok("POST", "/v1/node/bindings/pending", ep.valid(), "", nil) }
	return []*hostileEndpoint{ep}
}

// hostileAcceptance is the shared spec of accept and node reject on session id.
func hostileAcceptance(t *testing.T, w *arena, name, id string, accepted bool, p api.PendingAuthorization) *hostileEndpoint {
	n := w.n
	action := map[bool]string{true: "accept", false: "reject"}[accepted]
	ep := &hostileEndpoint{name: name, method: "POST", path: "/v1/node/bindings/" + id + "/" + action}
	ep.valid = func() jsonTree { return toTree(t, n.acceptance(t, p, accepted, w.now())) }
	ep.resign = func(b jsonTree, changed []string) {
		hostileResign(t, b, "acceptance", "signature", changed, n.priv, func(acc binding.Acceptance) canonical.Message { return acc.Acceptance })
	}
	a := func(f string) []string { return []string{"acceptance", f} }
	ep.fields = []hostileField{
		{path: []string{"acceptance"}, kind: fkObject, required: true},
		{path: a("binding_session_id"), kind: fkString, required: true, ctrl: refused.badRequest, id: true},
		{path: a("node_did"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: a("operator_did"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: a("authorization_digest"), kind: fkString, required: true, ctrl: refused.badRequest},
		{path: a("accepted"), kind: fkBool, required: true},
		{path: a("issued_at"), kind: fkString, required: true, ctrl: refused.badRequest, time: refused.badRequest},
		{path: a("signature"), kind: fkString, required: true, ctrl: refused.badSignature},
	}
	stranger := newNode(t, "stranger")
	other := newOperator(t, "other", w.now(), "nodes.bind")
	ep.addEdits(t, map[string]hostileEdit{
		"mismatch/session":        {a("binding_session_id"), "bs-other", refused.badRequest},
		"mismatch/node":           {a("node_did"), stranger.did, refused.badRequest},
		"mismatch/operator-did":   {a("operator_did"), other.did, refused.badRequest},
		"mismatch/digest":         {a("authorization_digest"), strings.Repeat("0", 64), refused.badRequest},
		"mismatch/digest-upper":   {a("authorization_digest"), strings.ToUpper(ep.valid().get(a("authorization_digest")).(string)), refused.badRequest},
		"mismatch/accepted":       {a("accepted"), !accepted, refused.badRequest},
		"did/operator-tag":        {a("node_did"), w.op.did, refused.badRequest},
		"signature/garbage":       {a("signature"), "0OIl", refused.badSignature},
		"signature/empty":         {a("signature"), "", refused.badSignature},
		"signature/by-stranger":   {a("signature"), sign(t, stranger.priv, n.acceptance(t, p, accepted, w.now()).Acceptance.Acceptance), refused.badSignature},
		"signature/over-opposite": {a("signature"), n.acceptance(t, p, !accepted, w.now()).Acceptance.Signature, refused.badSignature},
	})
	for what, c := range map[string]struct {
		id   string
		want hostileAnswer
	}{"unknown": {"bs-nope", refused.notFound}, "initiated": {"bs-acc-initiated", refused.badState}, "active": {"bs-acc-active", refused.alreadyActive}} {
		ep.extra = append(ep.extra, hostileCase{name: "session/" + what, path: "/v1/node/bindings/" + c.id + "/" + action, want: c.want,
			body: func() []byte { return ep.valid().encode(t, "") }})
	}
	ep.extra = append(ep.extra, hostileCase{name: "unknown-action", path: "/v1/node/bindings/" + id + "/approve", want: refused.notFound,
		body: func() []byte { return ep.valid().encode(t, "") }})
	ep.succeed = func(t *testing.T) {
		var st api.StateResult
		w.ok("POST", ep.path, ep.valid(), "", &st)
		want := map[bool]string{true: "ACTIVE", false: "REJECTED_BY_NODE"}[accepted]
		if st.State != want {
			t.Fatalf("%s: state %s, want %s", name, st.State, want)
		}
	}
	return ep
}

func hostileAcceptStates(w *arena) {
	if _, err := w.svc.SessionStatus(w.t.Context(), "bs-acc-initiated"); err != nil {
		w.drive(w.n, w.op, w.token, "bs-acc-initiated", "INITIATED")
		w.drive(w.n, w.op, w.token, "bs-acc-active", "ACTIVE")
	}
}

func hostileAccept(t *testing.T, w *arena) []*hostileEndpoint {
	hostileAcceptStates(w)
	p := w.drive(w.n, w.op, w.token, "bs-accept", "PENDING_NODE_ACCEPTANCE").pend
	return []*hostileEndpoint{hostileAcceptance(t, w, "accept", "bs-accept", true, p)}
}

func hostileNodeReject(t *testing.T, w *arena) []*hostileEndpoint {
	hostileAcceptStates(w)
	p := w.drive(w.n, w.op, w.token, "bs-node-reject", "PENDING_NODE_ACCEPTANCE").pend
	return []*hostileEndpoint{hostileAcceptance(t, w, "node-reject", "bs-node-reject", false, p)}
}

// expiredBearerEndpoints: an hour after login, every bearer endpoint answers
// SESSION_EXPIRED and changes nothing.
func hostileExpiredBearer(t *testing.T, w *arena) []*hostileEndpoint {
	view := w.drive(w.n, w.op, w.token, "bs-exp", "PENDING_OPERATOR").view
	w.clock.Advance(authn.SessionTTL)
	ep := &hostileEndpoint{name: "expired-bearer", bearer: w.token}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/operator/me/nodes"}, {"GET", "/v1/operator/me/credits"}, {"GET", "/v1/operator/me/evidence"},
		{"POST", "/v1/bindings/bs-exp/cancel"}, {"POST", "/v1/bindings/bs-exp/reject"},
	} {
		ep.extra = append(ep.extra, hostileCase{name: c.path, method: c.method, path: c.path, want: refused.sessionExpired})
	}
	ep.extra = append(ep.extra,
		hostileCase{name: "resolve", method: "POST", path: "/v1/bindings/resolve", want: refused.sessionExpired,
			body: func() []byte { return []byte(`{"short_code":"ZZZZZZZZ"}`) }},
		hostileCase{name: "authorize", method: "POST", path: "/v1/bindings/authorize", want: refused.sessionExpired,
			body: func() []byte { return toTree(t, w.op.authorize(t, view, w.now(), num(5), num(50))).encode(t, "") }},
	)
	return []*hostileEndpoint{ep}
}

func hostileRoutes(t *testing.T, w *arena) []*hostileEndpoint {
	ep := &hostileEndpoint{name: "routes"}
	for _, c := range []struct {
		method, path string
		want         hostileAnswer
	}{
		{"GET", "/v1/oracle/price", refused.notFound}, {"POST", "/v1/oracle/report", refused.notFound},
		{"POST", "/v1/dex/intent", refused.notFound}, {"GET", "/v1/dex/quote", refused.notFound}, {"POST", "/v1/dex/solve", refused.notFound},
		{"GET", "/v1/dex/pools", refused.notFound}, {"POST", "/v1/bindings/frobnicate", refused.notFound},
		{"POST", "/v1/bindings/x/frobnicate", refused.notFound}, {"POST", "/v1/node/bindings/frobnicate", refused.notFound},
		{"POST", "/v1/node/bindings/x/frobnicate", refused.notFound}, {"GET", "/nodes/", refused.notFound}, {"GET", "/", refused.notFound},
		{"GET", "/v1/bindings/initiate", refused.methodNotAllowed}, {"PUT", "/health", refused.methodNotAllowed},
		{"GET", "/api/v1/register", refused.methodNotAllowed}, {"GET", "/v1/auth/device-login", refused.methodNotAllowed},
		{"DELETE", "/v1/bindings/x/status", refused.methodNotAllowed}, {"PATCH", "/v1/node/bindings/pending", refused.methodNotAllowed},
	} {
		ep.extra = append(ep.extra, hostileCase{name: c.method + " " + c.path, method: c.method, path: c.path, want: c.want})
	}
	return []*hostileEndpoint{ep}
}
