package registry_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
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
	} else if onPostgres(t) && path == "/v1/auth/device-login" {
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
	// Each group has an arena of its own, so the groups run side by side: on PostgreSQL they
	// spend their time waiting on its round trips.
	t.Cleanup(func() {
		t.Logf("hostile input: %d bad requests, each refused with its exact status and code and no change to the store", count.Load())
	})
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
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
