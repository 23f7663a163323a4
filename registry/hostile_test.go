package registry_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

// hostileAnswer is the one answer a bad request must get.
type hostileAnswer struct {
	status int
	code   string
}

// refused holds the answers the bad requests of these tests must get.
var refused = struct {
	badRequest       hostileAnswer
	tooLarge         hostileAnswer
	noSession        hostileAnswer
	sessionExpired   hostileAnswer
	badSignature     hostileAnswer
	badChallenge     hostileAnswer
	idBindingFailed  hostileAnswer
	idBindingNeeded  hostileAnswer
	dcIDBinding      hostileAnswer
	dcBadSignature   hostileAnswer
	dcExpired        hostileAnswer
	staleTS          hostileAnswer
	authzExpired     hostileAnswer
	permissionDenied hostileAnswer
	scopeExceeded    hostileAnswer
	notFound         hostileAnswer
	unknownDID       hostileAnswer
	methodNotAllowed hostileAnswer
	sessionExists    hostileAnswer
	badState         hostileAnswer
	alreadyActive    hostileAnswer
	didCollision     hostileAnswer
	ttlTooLong       hostileAnswer
	alreadyExpired   hostileAnswer
}{
	badRequest:       hostileAnswer{http.StatusBadRequest, "BAD_REQUEST"},
	tooLarge:         hostileAnswer{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
	noSession:        hostileAnswer{http.StatusUnauthorized, "NO_SESSION"},
	sessionExpired:   hostileAnswer{http.StatusUnauthorized, "SESSION_EXPIRED"},
	badSignature:     hostileAnswer{http.StatusUnauthorized, "BAD_SIGNATURE"},
	badChallenge:     hostileAnswer{http.StatusUnauthorized, "BAD_CHALLENGE"},
	idBindingFailed:  hostileAnswer{http.StatusUnauthorized, "ID_BINDING_FAILED"},
	idBindingNeeded:  hostileAnswer{http.StatusUnauthorized, "ID_BINDING_REQUIRED"},
	dcIDBinding:      hostileAnswer{http.StatusUnauthorized, "DC_ID_BINDING"},
	dcBadSignature:   hostileAnswer{http.StatusUnauthorized, "DC_BAD_SIGNATURE"},
	dcExpired:        hostileAnswer{http.StatusUnauthorized, "DC_EXPIRED"},
	staleTS:          hostileAnswer{http.StatusUnauthorized, "STALE_TS"},
	authzExpired:     hostileAnswer{http.StatusUnauthorized, "AUTHZ_EXPIRED"},
	permissionDenied: hostileAnswer{http.StatusForbidden, "PERMISSION_DENIED"},
	scopeExceeded:    hostileAnswer{http.StatusForbidden, "SCOPE_EXCEEDED"},
	notFound:         hostileAnswer{http.StatusNotFound, "NOT_FOUND"},
	unknownDID:       hostileAnswer{http.StatusNotFound, "UNKNOWN_DID"},
	methodNotAllowed: hostileAnswer{http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
	sessionExists:    hostileAnswer{http.StatusConflict, "SESSION_EXISTS"},
	badState:         hostileAnswer{http.StatusConflict, "BAD_STATE"},
	alreadyActive:    hostileAnswer{http.StatusConflict, "ALREADY_ACTIVE"},
	didCollision:     hostileAnswer{http.StatusConflict, "DID_COLLISION"},
	ttlTooLong:       hostileAnswer{http.StatusBadRequest, "TTL_TOO_LONG"},
	alreadyExpired:   hostileAnswer{http.StatusBadRequest, "ALREADY_EXPIRED"},
}

// hostileKind is a field's JSON type in a request.
type hostileKind int

const (
	fkString hostileKind = iota
	fkList
	fkNumber // a limit: finite, 0..2^53-1, or null
	fkInteger
	fkBool
	fkObject
)

// hostileField describes one request field for the generated cases: its type, whether it is
// required, and what each kind of hostile value must get.
type hostileField struct {
	path     []string
	kind     hostileKind
	required bool
	ctrl     hostileAnswer // a control character inside the value; zero: not generated
	text     bool          // 1–256 bytes when present
	id       bool          // binding_session_id: 1–128 of [A-Za-z0-9._-]
	time     hostileAnswer // a malformed timestamp; zero: not a timestamp
}

// hostileEndpoint is one endpoint under attack: a valid request, how to re-sign it after a
// field changed (so a case fails at the check it aims at and not at a signature), its
// fields, and the cases only it has.
type hostileEndpoint struct {
	name   string
	method string
	path   string
	bearer string
	valid  func() jsonTree
	resign func(b jsonTree, changed []string)
	fields []hostileField
	extra  []hostileCase
	// succeed sends the valid request once the matrix has run: it must still work, so every
	// case was a refusal of one hostile change to an acceptable request.
	succeed func(t *testing.T)
}

// hostileCase is one bad request and its one answer.
type hostileCase struct {
	name           string
	method, path   string
	bearer         string
	noBearer       bool
	header         string // a raw Authorization header, sent as is
	body           func() []byte
	want           hostileAnswer
	countsFailures bool // a resolve 404: the failure counters change, nothing else
	after          func(t *testing.T)
}

// hostileDeleted marks a field to remove.
type hostileDeleted struct{}

// hostileEdit is one change to an endpoint's valid request: the value v at path, and the
// answer the registry must give.
type hostileEdit struct {
	path []string
	v    any
	want hostileAnswer
}

// addEdits adds to the endpoint's cases the valid request changed by each edit, under its name.
func (ep *hostileEndpoint) addEdits(t *testing.T, edits map[string]hostileEdit) {
	for name, e := range edits {
		ep.extra = append(ep.extra, ep.mutate(t, name, e.path, e.v, "", e.want))
	}
}

// mutate is the case "the valid request with path set to v".
func (ep *hostileEndpoint) mutate(t *testing.T, name string, path []string, v any, raw string, want hostileAnswer) hostileCase {
	return hostileCase{name: name, want: want, body: func() []byte {
		b := ep.valid()
		if _, del := v.(hostileDeleted); del {
			b.del(path)
		} else {
			b.set(path, v)
		}
		if ep.resign != nil {
			ep.resign(b, path)
		}
		return b.encode(t, raw)
	}}
}

var hostileControls = []struct{ name, c string }{
	{"lf", "\n"}, {"cr", "\r"}, {"tab", "\t"}, {"nul", "\x00"}, {"us", "\x1f"}, {"del", "\x7f"}, {"esc", "\x1b"},
}

var hostileTimes = []string{
	"2026-03-01T12:00:00.000Z", "2026-03-01T12:00:00+00:00", "2026-03-01T12:00:00z", "2026-03-01T12:00:00",
	"2026-03-01 12:00:00Z", "2026-03-01t12:00:00Z", "2026-3-01T12:00:00Z", "2026-02-30T12:00:00Z",
	"2026-03-01T24:00:00Z", "2026-13-01T12:00:00Z", "2026-03-01T12:00:60Z", "1772366400", "", "now",
	" 2026-03-01T12:00:00Z",
}

// proofOptional reports whether ep is a node's form that answers a request with neither a
// bearer nor a body NO_SESSION (cancel, unbind, node reject).
func (ep *hostileEndpoint) proofOptional() bool {
	return ep.bearer == "" && (strings.HasSuffix(ep.path, "/cancel") || strings.HasSuffix(ep.path, "/unbind") ||
		strings.HasPrefix(ep.path, "/v1/node/bindings/") && strings.HasSuffix(ep.path, "/reject"))
}

// generated returns the cases every endpoint with a body gets: bodies that are not one JSON
// object, bodies over the size limit, and for each field its absence, every wrong JSON type
// and each hostile value its kind allows.
func (ep *hostileEndpoint) generated(t *testing.T) []hostileCase {
	var cs []hostileCase
	notObjects := map[string]string{
		"empty": "", "spaces": "   \n", "text": "not json", "open-brace": "{", "cut-off": `{"a":`,
		"close-brace": "}", "bad-literal": "nul", "array": "[]", "array-of-object": "[{}]",
		"string": `"str"`, "number": "42", "true": "true", "null": "null", "trailing": `{"a":1}x`,
		"two-objects": "{}{}", "trailing-comma": `{"a":1,}`, "invalid-utf8": "\xff\xfe\xfd",
		"single-quotes": `{'a':1}`, "nan": "NaN", "bom": "\xef\xbb\xbf{}",
	}
	for name, raw := range notObjects {
		want := refused.badRequest
		if strings.TrimSpace(raw) == "" && ep.proofOptional() {
			want = refused.noSession // neither a bearer nor a body: nothing was proved
		}
		cs = append(cs, hostileCase{name: "body/" + name, want: want, body: func() []byte { return []byte(raw) }})
	}
	cs = append(cs,
		hostileCase{name: "body/valid-in-array", want: refused.badRequest, body: func() []byte {
			return append(append([]byte("["), ep.valid().encode(t, "")...), ']')
		}},
		hostileCase{name: "body/valid-as-string", want: refused.badRequest, body: func() []byte {
			s, _ := json.Marshal(string(ep.valid().encode(t, "")))
			return s
		}},
		hostileCase{name: "body/over-64KiB-valid-object", want: refused.tooLarge, body: func() []byte {
			b := ep.valid()
			b["padding"] = strings.Repeat("p", httpapi.MaxBodyBytes)
			return b.encode(t, "")
		}},
		hostileCase{name: "body/64KiB+1-garbage", want: refused.tooLarge, body: func() []byte {
			return []byte(strings.Repeat("x", httpapi.MaxBodyBytes+1))
		}},
		hostileCase{name: "body/empty-object", want: refused.badRequest, body: func() []byte { return []byte("{}") }},
	)
	if ep.bearer != "" {
		// The body's shape is checked before the bearer (docs/protocol.md §5.0).
		for _, name := range []string{"text", "array", "trailing"} {
			raw := notObjects[name]
			cs = append(cs, hostileCase{name: "no-bearer/body/" + name, noBearer: true, want: refused.badRequest, body: func() []byte { return []byte(raw) }})
		}
		cs = append(cs, hostileCase{name: "no-bearer/body/empty-object", noBearer: true, want: refused.badRequest, body: func() []byte { return []byte("{}") }})
	}
	for _, f := range ep.fields {
		cs = append(cs, ep.fieldCases(t, f)...)
	}
	return cs
}

func (ep *hostileEndpoint) fieldCases(t *testing.T, f hostileField) []hostileCase {
	name := strings.Join(f.path, ".")
	var cs []hostileCase
	add := func(what string, v any, raw string, want hostileAnswer) {
		cs = append(cs, ep.mutate(t, name+"/"+what, f.path, v, raw, want))
	}
	if f.required {
		add("missing", hostileDeleted{}, "", refused.badRequest)
		add("null", nil, "", refused.badRequest)
	}
	wrong := map[hostileKind]map[string]any{
		fkString:  {"number": json.Number("7"), "true": true, "array": []any{"x"}, "object": map[string]any{"a": "b"}, "empty-array": []any{}},
		fkList:    {"string": "x", "number": json.Number("7"), "true": false, "object": map[string]any{}, "number-item": []any{json.Number("7")}, "null-item": []any{nil}, "nested": []any{[]any{"x"}}, "bool-item": []any{true}},
		fkNumber:  {"string": "10", "true": true, "array": []any{}, "object": map[string]any{}, "string-nan": "NaN"},
		fkInteger: {"string": "1", "fraction": json.Number("1.5"), "negative-fraction": json.Number("-1.5"), "true": true, "array": []any{}, "object": map[string]any{}, "exponent": json.Number("1e3"), "overflow": json.Number("99999999999999999999")},
		fkBool:    {"string": "true", "capitalised": "True", "one": json.Number("1"), "zero": json.Number("0"), "array": []any{}, "object": map[string]any{}},
		fkObject:  {"string": "x", "number": json.Number("7"), "array": []any{}, "array-of-object": []any{map[string]any{}}, "true": true},
	}
	for what, v := range wrong[f.kind] {
		add("wrong-type/"+what, v, "", refused.badRequest)
	}
	switch f.kind {
	case fkInteger:
		add("raw/1e400", rawMarker, "1e400", refused.badRequest)
	case fkNumber:
		for what, raw := range map[string]string{"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1e400": "1e400", "-1e400": "-1e400"} {
			add("raw/"+what, rawMarker, raw, refused.badRequest)
		}
		for what, v := range map[string]json.Number{"negative": "-1", "negative-fraction": "-0.5", "2^53": "9007199254740992", "1e16": "1e16", "huge": "1e300"} {
			add("value/"+what, v, "", refused.badRequest)
		}
	case fkList:
		valid, _ := ep.valid().get(f.path).([]any)
		with := func(items ...any) []any { return append(append([]any{}, valid...), items...) }
		add("item/comma", with("a,b"), "", refused.badRequest)
		add("item/only-comma", []any{","}, "", refused.badRequest)
		add("item/empty", with(""), "", refused.badRequest)
		for _, c := range hostileControls {
			add("item/"+c.name, with("x"+c.c+"y"), "", refused.badRequest)
		}
		add("item/65-bytes", with(strings.Repeat("x", 65)), "", refused.badRequest)
		many := make([]any, 65)
		for i := range many {
			many[i] = fmt.Sprintf("i%02d", i)
		}
		add("65-items", many, "", refused.badRequest)
	case fkString:
		valid, _ := ep.valid().get(f.path).(string)
		if f.ctrl != (hostileAnswer{}) {
			mid := len(valid) / 2
			for _, c := range hostileControls {
				add("control/"+c.name, valid[:mid]+c.c+valid[mid:], "", f.ctrl)
			}
			add("control/trailing-lf", valid+"\n", "", f.ctrl)
		}
		if f.text {
			add("limit/257-bytes", strings.Repeat("a", 257), "", refused.badRequest)
			add("limit/257-bytes-in-129-chars", strings.Repeat("é", 128)+"a", "", refused.badRequest)
			add("limit/empty", "", "", refused.badRequest)
		}
		if f.id {
			for what, v := range map[string]string{
				"empty": "", "129-chars": strings.Repeat("b", 129), "slash": "bs/1", "space": "bs 1",
				"non-ascii": "bs-é", "percent": "bs%2F1", "colon": "bs:1", "plus": "bs+1",
			} {
				add("id/"+what, v, "", refused.badRequest)
			}
		}
		if f.time != (hostileAnswer{}) {
			for i, v := range hostileTimes {
				add(fmt.Sprintf("time/%02d", i), v, "", f.time)
			}
		}
	}
	return cs
}

// hostileMatrix runs cases against one arena and counts them.
type hostileMatrix struct {
	w     *arena
	count *atomic.Int64
}

func (m hostileMatrix) run(t *testing.T, ep *hostileEndpoint, c hostileCase) {
	t.Helper()
	method, path, bearer := ep.method, ep.path, ep.bearer
	if c.method != "" {
		method = c.method
	}
	if c.path != "" {
		path = c.path
	}
	if c.bearer != "" {
		bearer = c.bearer
	}
	if c.noBearer {
		bearer = ""
	}
	var body any
	if c.body != nil {
		body = c.body()
	} else if ep.valid != nil {
		body = ep.valid().encode(t, "")
	}
	auth := c.header
	if auth == "" && bearer != "" {
		auth = "Bearer " + bearer
	}
	// Every 404 of a resolve is a counted failure; nothing else may change the store.
	counted := c.countsFailures || (path == "/v1/bindings/resolve" && c.want == refused.notFound)
	before := hostileSnapshot(t, m.w.st)
	status, raw := m.w.request(method, path, body, auth)
	after := hostileSnapshot(t, m.w.st)
	m.count.Add(1)
	what := fmt.Sprintf("%s %s [%s]", method, path, c.name)
	if status != c.want.status {
		t.Errorf("%s: status %d, want %d %s; body %s", what, status, c.want.status, c.want.code, raw)
	}
	hostileErrorBody(t, what, raw, c.want.code)
	if counted {
		hostileSameStore(t, what+" (counters aside)", before.withoutCounters(), after.withoutCounters())
		if string(before.bytes(t)) == string(after.bytes(t)) {
			t.Errorf("%s: a failed resolve was not counted", what)
		}
	} else if onPostgres && path == "/v1/auth/device-login" {
		hostileSameStore(t, what+" (login budgets aside)", before.withoutLoginCounters(), after.withoutLoginCounters())
	} else {
		hostileSameStore(t, what, before, after)
	}
	if c.after != nil {
		c.after(t)
	}
}

// TestHostileInput sends every endpoint malformed, mistyped, oversized and hostile requests
// and every refused value of the shared vectors, and checks for each the exact status and
// code, the error body's shape, and that the store is byte-for-byte what it was (only a
// counted resolve failure may change the counters).
func TestHostileInput(t *testing.T) {
	var count atomic.Int64
	groups := []struct {
		name  string
		build func(t *testing.T, w *arena) []*hostileEndpoint
	}{
		{"discovery", hostileDiscovery},
		{"register", hostileRegister},
		{"heartbeat", hostileHeartbeat},
		{"challenge", hostileChallenge},
		{"device-login", hostileLogin},
		{"operator-views", hostileOperatorViews},
		{"initiate", hostileInitiate},
		{"resolve", hostileResolve},
		{"authorize", hostileAuthorize},
		{"status", hostileStatusEndpoint},
		{"cancel", hostileCancels},
		{"operator-reject", hostileOperatorReject},
		{"pending", hostilePending},
		{"accept", hostileAccept},
		{"node-reject", hostileNodeReject},
		{"expired-bearer", hostileExpiredBearer},
		{"routes", hostileRoutes},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			w := newArena(t)
			m := hostileMatrix{w: w, count: &count}
			for _, ep := range g.build(t, w) {
				var cases []hostileCase
				if ep.valid != nil {
					cases = ep.generated(t)
				}
				cases = append(cases, ep.extra...)
				for _, c := range cases {
					m.run(t, ep, c)
				}
				if ep.succeed != nil {
					ep.succeed(t)
				}
			}
		})
	}
	t.Logf("hostile input: %d bad requests, each refused with its exact status and code and no change to the store", count.Load())
}

// TestHostileRejectVectors sends every case of rejects.json to its endpoint: a valid request
// with the case's field replaced (re-signed where the case's stage comes after a signature
// check), against an arena where every earlier check passes.
func TestHostileRejectVectors(t *testing.T) {
	cases := testkit.Rejects(t).Cases
	w := newArena(t)
	var count atomic.Int64
	m := hostileMatrix{w: w, count: &count}
	eps := map[int][]*hostileEndpoint{}
	for _, ep := range hostileLogin(t, w) {
		eps[1] = append(eps[1], ep)
		eps[2] = append(eps[2], ep)
	}
	eps[3] = hostileRegister(t, w)
	eps[4] = hostileHeartbeat(t, w)
	eps[5] = hostilePending(t, w)
	eps[6] = hostileInitiate(t, w)
	eps[7] = hostileAuthorize(t, w)
	// A DeviceCredential is checked alike wherever it travels.
	eps[2] = append(eps[2], eps[7]...)
	eps[8] = append(hostileAccept(t, w), hostileNodeReject(t, w)...)
	for _, ep := range hostileCancels(t, w) {
		if ep.name == "cancel-node" {
			eps[9] = append(eps[9], ep)
		}
	}
	seen := map[int]bool{}
	for _, c := range cases {
		targets := eps[c.Message]
		if len(targets) == 0 {
			t.Fatalf("%s: no endpoint for message %d", c.ID, c.Message)
		}
		seen[c.Message] = true
		for _, ep := range targets {
			path := []string{c.Field}
			switch c.Message {
			case 2:
				path = []string{"device_credential", c.Field}
			case 7:
				path = []string{"authorization_credential", c.Field}
			case 8:
				path = []string{"acceptance", c.Field}
			}
			v, raw := hostileValue(t, c)
			mc := ep.mutate(t, c.ID, path, v, raw, hostileAnswer{c.Expected.HTTP, c.Expected.Code})
			if c.Expected.Consumed() {
				mc = hostileBurnsChallenge(t, w, ep, mc)
			}
			m.run(t, ep, mc)
		}
	}
	for _, ep := range [][]*hostileEndpoint{eps[1], eps[3], eps[4], eps[5], eps[6], eps[7], eps[8], eps[9]} {
		for _, e := range ep {
			if e.succeed != nil {
				e.succeed(t)
			}
		}
	}
	for msg := 1; msg <= 9; msg++ {
		if !seen[msg] {
			t.Errorf("rejects.json has no case for message %d", msg)
		}
	}
	t.Logf("rejects.json: %d cases sent (%d requests)", len(cases), count.Load())
}

// hostileBurnsChallenge pins the challenge a login case uses and checks afterwards that the
// failed login burnt it: the same challenge with a valid signature is BAD_CHALLENGE.
func hostileBurnsChallenge(t *testing.T, w *arena, ep *hostileEndpoint, c hostileCase) hostileCase {
	var challenge string
	inner := c.body
	c.body = func() []byte {
		b := inner()
		var l struct {
			Challenge string `json:"challenge"`
		}
		_ = json.Unmarshal(b, &l)
		challenge = l.Challenge
		return b
	}
	c.after = func(t *testing.T) {
		w.fails("POST", "/v1/auth/device-login", w.op.loginRequest(t, challenge, w.now()), "", http.StatusUnauthorized, "BAD_CHALLENGE")
	}
	return c
}

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
