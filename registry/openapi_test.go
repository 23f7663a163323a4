package registry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

// openapiDoc is the OpenAPI document of the registry, loaded once for every test. The
// harness validates each exchange it makes against it (checkExchange): against the
// document as written when the harness is strict (TestOpenAPIExchanges), else against a
// lenient copy that allows fields the document does not name and skips answers from routes
// it lacks. So a change that adds a field or a route without documenting it fails the
// OpenAPI tests, with one clear message each, and not every test of the package.
var openapiDoc struct {
	once              sync.Once
	strict, lenient   *openapi3.T
	strictR, lenientR routers.Router
	err               error

	mu   sync.Mutex
	seen map[string]map[int]bool // operationId → statuses answered, checked by TestOpenAPIExchanges
}

// loadAPI validates the embedded document and returns it as written (strict) or lenient.
func loadAPI(t *testing.T, strict bool) (*openapi3.T, routers.Router) {
	t.Helper()
	openapiDoc.once.Do(func() {
		if openapiDoc.err = validateAs30(httpapi.OpenAPI()); openapiDoc.err != nil {
			return
		}
		openapiDoc.strict, openapiDoc.strictR, openapiDoc.err = loadDoc(false)
		if openapiDoc.err == nil {
			openapiDoc.lenient, openapiDoc.lenientR, openapiDoc.err = loadDoc(true)
		}
		openapiDoc.seen = map[string]map[int]bool{}
	})
	if openapiDoc.err != nil {
		t.Fatalf("openapi.json: %v", openapiDoc.err)
	}
	if strict {
		return openapiDoc.strict, openapiDoc.strictR
	}
	return openapiDoc.lenient, openapiDoc.lenientR
}

// loadDoc loads the embedded document and a router over it; lenient lifts every
// "additionalProperties": false.
func loadDoc(lenient bool) (*openapi3.T, routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, nil, err
	}
	// The document names the daemon's default address; the tests serve on another port.
	doc.Servers = nil
	if lenient {
		seen := map[*openapi3.Schema]bool{}
		var relax func(r *openapi3.SchemaRef)
		relax = func(r *openapi3.SchemaRef) {
			if r == nil || r.Value == nil || seen[r.Value] {
				return
			}
			seen[r.Value] = true
			r.Value.AdditionalProperties = openapi3.AdditionalProperties{}
			for _, p := range r.Value.Properties {
				relax(p)
			}
			relax(r.Value.Items)
			for _, l := range [][]*openapi3.SchemaRef{r.Value.AllOf, r.Value.AnyOf, r.Value.OneOf} {
				for _, x := range l {
					relax(x)
				}
			}
		}
		for _, sc := range doc.Components.Schemas {
			relax(sc)
		}
	}
	router, err := gorillamux.NewRouter(doc)
	return doc, router, err
}

// validateAs30 checks the document's structure with kin-openapi's document validator. That
// validator knows OpenAPI 3.0 only (the releases that know 3.1 need a newer Go than this
// module's), so the one 3.1 construct the document uses, a type list with "null", is
// rewritten to 3.0's nullable on a copy first. Requests and answers are validated against
// the 3.1 document itself, whose type lists the request and answer validators understand.
func validateAs30(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	var rewrite func(v any)
	rewrite = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if types, ok := x["type"].([]any); ok && slices.Contains(types, any("null")) {
				rest := slices.DeleteFunc(slices.Clone(types), func(t any) bool { return t == "null" })
				if len(rest) != 1 {
					return
				}
				x["type"], x["nullable"] = rest[0], true
			}
			if x["type"] == "null" {
				delete(x, "type")
				x["nullable"], x["enum"] = true, []any{nil}
			}
			for _, e := range x {
				rewrite(e)
			}
		case []any:
			for _, e := range x {
				rewrite(e)
			}
		}
	}
	rewrite(v)
	m := v.(map[string]any)
	m["openapi"] = "3.0.3"
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return err
	}
	return doc.Validate(context.Background())
}

// checkExchange validates one request the harness sent and the answer it got against the
// OpenAPI document: the answer always (status, Content-Type, body), the request whenever
// the registry accepted it (a 2xx answer to a request the document refuses means the
// document is wrong). A request to a path or method the document lacks must have been
// answered with the error body, 404 or 405; a lenient check leaves other answers from
// such a route to TestOpenAPIRoutes.
func checkExchange(t *testing.T, strict bool, sent *http.Request, body []byte, resp *http.Response, out []byte) {
	t.Helper()
	doc, router := loadAPI(t, strict)
	ctx := context.Background()
	req, err := http.NewRequest(sent.Method, sent.URL.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = sent.Header.Clone()
	if rest, ok := strings.CutPrefix(req.URL.Path, "/log/tile/"); ok && rest != "" {
		// {tile} stands for several segments, which OpenAPI's templates cannot say: the
		// router is given the path as one segment.
		req.URL.Path = "/log/tile/" + strings.ReplaceAll(rest, "/", "_")
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		if !strict && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			return
		}
		var e any
		jerr := json.Unmarshal(out, &e)
		if jerr == nil {
			jerr = doc.Components.Schemas["Error"].Value.VisitJSON(e)
		}
		if (resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed) || jerr != nil {
			t.Errorf("openapi: %s %s is not in the document (%v), yet answered %d %s (%v)", sent.Method, sent.URL.Path, err, resp.StatusCode, out, jerr)
		}
		return
	}
	if rb := route.Operation.RequestBody; len(body) > 0 && req.Header.Get("Content-Type") == "" && rb != nil {
		// The registry reads a body as JSON whatever its Content-Type (protocol 5), and the
		// document says application/json; the challenge takes any body at all.
		ct := "application/octet-stream"
		if rb.Value.Content.Get("application/json") != nil {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true,
			// The operator forms of cancel and unbind ignore the body, as the document says
			// in words.
			ExcludeRequestBody: (route.Operation.OperationID == "cancel" || route.Operation.OperationID == "unbind") && req.Header.Get("Authorization") != "",
		},
	}
	if resp.StatusCode/100 == 2 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("openapi: the registry accepted a request the document refuses: %s %s %s: %v", sent.Method, sent.URL.Path, body, err)
		}
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(out)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		t.Errorf("openapi: %s %s answered %d %s, which the document does not allow: %v", sent.Method, sent.URL.Path, resp.StatusCode, out, err)
	}
	if !strict {
		return
	}
	openapiDoc.mu.Lock()
	defer openapiDoc.mu.Unlock()
	if openapiDoc.seen[route.Operation.OperationID] == nil {
		openapiDoc.seen[route.Operation.OperationID] = map[int]bool{}
	}
	openapiDoc.seen[route.Operation.OperationID][resp.StatusCode] = true
}

// documented lists the document's operations as method and path.
func documented(doc *openapi3.T) [][2]string {
	var out [][2]string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, [2]string{method, path})
		}
	}
	return sortedPairs(out)
}

func sortedPairs(p [][2]string) [][2]string {
	p = slices.Clone(p)
	sort.Slice(p, func(i, j int) bool { return p[i][1]+" "+p[i][0] < p[j][1]+" "+p[j][0] })
	return p
}

// TestOpenAPIRoutes: the document and the endpoint table, which is the router, hold the same
// endpoints. A route the document lacks, a documented path nothing serves, or another
// method served on a documented path fails here.
func TestOpenAPIRoutes(t *testing.T) {
	doc, _ := loadAPI(t, true)
	h := newHarness(t)
	n := newNode(t, "n")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-routes", h.now(), nil, nil), "", nil)

	var table [][2]string
	for _, o := range httpapi.Operations() {
		table = append(table, [2]string{o.Method, o.Path})
	}
	table = sortedPairs(table)
	if got := documented(doc); !slices.Equal(got, table) {
		t.Errorf("the document's operations differ from the endpoint table:\ndocument: %v\ntable:    %v", got, table)
	}

	// Every documented path answers exactly its documented methods: a served method never
	// answers the router's 404 "no such endpoint" or 405, every other method answers 405.
	paths := map[string][]string{}
	for _, e := range table {
		paths[e[1]] = append(paths[e[1]], e[0])
	}
	for tmpl, methods := range paths {
		path := strings.ReplaceAll(tmpl, "{id}", "bs-routes")
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			var body []byte
			if m != "GET" {
				body = []byte("{}")
			}
			status, _, raw := h.send(m, path, body)
			var e api.ErrorBody
			json.Unmarshal(raw, &e)
			unserved := status == http.StatusMethodNotAllowed || (status == http.StatusNotFound && e.Error == "no such endpoint")
			switch {
			case slices.Contains(methods, m) && unserved:
				t.Errorf("%s %s is documented, but nothing serves it: %d %s", m, path, status, raw)
			case !slices.Contains(methods, m) && status != http.StatusMethodNotAllowed:
				t.Errorf("%s %s is not documented, yet answers %d %s (want 405)", m, path, status, raw)
			}
		}
	}

	// The Planned paths answer 404 to every method, and nothing documents them as endpoints.
	var planned struct {
		Paths []string `json:"paths"`
	}
	raw, _ := json.Marshal(doc.Extensions["x-svrp-planned"])
	if err := json.Unmarshal(raw, &planned); err != nil || len(planned.Paths) == 0 {
		t.Fatalf("x-svrp-planned: %s %v", raw, err)
	}
	for _, p := range planned.Paths {
		if _, ok := paths[p]; ok {
			t.Errorf("planned path %s is documented as an endpoint", p)
		}
		for _, m := range []string{"GET", "POST"} {
			h.fails(m, p, "{}", "", http.StatusNotFound, "NOT_FOUND")
		}
	}
}

// TestOpenAPIServed: GET /openapi.json serves the document kept in the repository.
func TestOpenAPIServed(t *testing.T) {
	h := newHarness(t)
	status, ct, raw := h.send("GET", "/openapi.json", nil)
	if status != http.StatusOK || ct != "application/json" || !bytes.Equal(raw, httpapi.OpenAPI()) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes (want the %d embedded)", status, ct, len(raw), len(httpapi.OpenAPI()))
	}
	var v struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q, %v", v.OpenAPI, err)
	}
}

// TestOpenAPIExchanges drives every endpoint through success and through errors over real
// HTTP on a real store; its harness is strict, so each request and answer is validated
// against the document as written (checkExchange): an answer field the document does not
// name fails here. It then checks that every documented operation was seen answering 200,
// and, where the document lists client errors for it, at least one of them.
func TestOpenAPIExchanges(t *testing.T) {
	doc, _ := loadAPI(t, true)
	h := newHarness(t)
	h.strictAPI = true
	now := h.now()
	n, other := newNode(t, "n"), newNode(t, "other")
	op, stranger := newOperator(t, "op", now, "nodes.bind"), newOperator(t, "stranger", now, "nodes.bind")

	// Discovery.
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	unsigned := other.registration(t, "10.0.0.1:7000")
	unsigned.Signature = nil
	h.ok("POST", "/api/v1/register", unsigned, "", nil)
	bad := n.registration(t, "203.0.113.7 :7000")
	h.fails("POST", "/api/v1/register", bad, "", http.StatusBadRequest, "BAD_REQUEST")
	h.fails("POST", "/api/v1/register", map[string]any{"did": "did:web:x", "public_key": n.key.Hex(), "endpoint": "a:1"}, "", http.StatusUnauthorized, "ID_BINDING_REQUIRED")
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, now), "", nil)
	h.fails("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), now.Add(-time.Hour)), "", http.StatusUnauthorized, "STALE_TS")
	stray := newNode(t, "stray")
	h.fails("POST", "/api/v1/heartbeat", stray.heartbeat(t, stray.did, now), "", http.StatusNotFound, "UNKNOWN_DID")
	h.ok("GET", "/health", nil, "", nil)
	h.ok("GET", "/ready", nil, "", nil)
	for _, p := range []string{"/nodes", "/peers", "/api/v1/peers"} {
		h.ok("GET", p, nil, "", nil)
		h.ok("GET", p+"?online_within=600&capability=inference&region=eu-west&callable=1", nil, "", nil)
		h.fails("GET", p+"?callable=maybe", nil, "", http.StatusBadRequest, "BAD_REQUEST")
	}
	h.fails("POST", "/v1/auth/challenge", bytes.Repeat([]byte("x"), httpapi.MaxBodyBytes+1), "", http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")

	// Login and the operator views.
	token := op.login(h)
	var ch api.ChallengeResult
	h.ok("POST", "/v1/auth/challenge", "{}", "", &ch)
	h.ok("POST", "/v1/auth/device-login", op.loginRequest(t, ch.Challenge, now), "", nil)
	h.fails("POST", "/v1/auth/device-login", op.loginRequest(t, ch.Challenge, now), "", http.StatusUnauthorized, "BAD_CHALLENGE")
	strangerToken := stranger.login(h)
	for _, p := range []string{"/v1/operator/me/nodes", "/v1/operator/me/credits", "/v1/operator/me/evidence"} {
		h.ok("GET", p, nil, token, nil)
		h.fails("GET", p, nil, "", http.StatusUnauthorized, "NO_SESSION")
	}
	h.fails("GET", "/v1/operator/me/nodes?online_within=-1", nil, token, http.StatusBadRequest, "BAD_REQUEST")

	// The binding handshake to every end, and its errors.
	active := h.drive(n, op, token, "bs-active", "ACTIVE")
	h.fails("POST", "/v1/node/bindings/bs-active/accept", n.acceptance(t, active.pend, true, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")
	h.fails("POST", "/v1/node/bindings/bs-active/reject", n.acceptance(t, active.pend, false, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")
	h.fails("POST", "/v1/bindings/bs-active/cancel", n.cancelRequest(t, "bs-active", n.did, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")
	h.ok("GET", "/v1/operator/me/nodes", nil, token, nil)
	h.drive(n, op, token, "bs-node-cancel", "CANCELLED")
	h.drive(n, op, token, "bs-op-reject", "REJECTED_BY_OPERATOR")
	h.drive(n, op, token, "bs-node-reject", "REJECTED_BY_NODE")
	resolved := h.drive(n, op, token, "bs-op-cancel", "PENDING_OPERATOR")
	h.fails("POST", "/v1/bindings/bs-op-cancel/reject", nil, strangerToken, http.StatusForbidden, "PERMISSION_DENIED")
	h.fails("POST", "/v1/bindings/bs-op-cancel/cancel", nil, strangerToken, http.StatusForbidden, "PERMISSION_DENIED")
	h.ok("POST", "/v1/bindings/bs-op-cancel/cancel", nil, token, nil)
	h.fails("POST", "/v1/bindings/authorize", op.authorize(t, resolved.view, h.now(), num(5), nil), token, http.StatusConflict, "BAD_STATE")
	h.fails("POST", "/v1/bindings/initiate", n.initiate(t, "bs-active", h.now(), nil, nil), "", http.StatusConflict, "SESSION_EXISTS")
	late := n.initiate(t, "bs-late", h.now(), nil, nil)
	late.ExpiresAt = canonical.FormatTime(h.now().Add(time.Hour))
	late.NodeSignature = sign(t, n.priv, late.BindingSession)
	h.fails("POST", "/v1/bindings/initiate", late, "", http.StatusBadRequest, "TTL_TOO_LONG")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "22222222"}, token, http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: "22222222"}, "", http.StatusUnauthorized, "NO_SESSION")
	h.fails("GET", "/v1/bindings/bs-none/status", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.ok("GET", "/v1/bindings/bs-active/status", nil, "", nil)
	h.fails("POST", "/v1/node/bindings/pending", n.poll(t, h.now().Add(-time.Hour)), "", http.StatusUnauthorized, "STALE_TS")
	h.fails("POST", "/v1/node/bindings/bs-none/accept", n.acceptance(t, active.pend, true, h.now()), "", http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/node/bindings/bs-none/reject", n.acceptance(t, active.pend, false, h.now()), "", http.StatusNotFound, "NOT_FOUND")

	// Leaving: unbind by either side, a superseded binding, revocation, logout.
	h.fails("POST", "/v1/bindings/bs-active/unbind", nil, strangerToken, http.StatusForbidden, "PERMISSION_DENIED")
	h.ok("POST", "/v1/bindings/bs-active/unbind", nil, token, nil)
	h.ok("GET", "/v1/bindings/bs-active/status", nil, "", nil)
	h.fails("POST", "/v1/bindings/bs-active/unbind", nil, token, http.StatusConflict, "BAD_STATE")
	h.drive(n, op, token, "bs-node-unbind", "ACTIVE")
	h.fails("POST", "/v1/bindings/bs-none/unbind", n.unbindRequest(t, "bs-none", n.did, h.now()), "", http.StatusNotFound, "NOT_FOUND")
	h.ok("POST", "/v1/bindings/bs-node-unbind/unbind", n.unbindRequest(t, "bs-node-unbind", n.did, h.now()), "", nil)
	h.drive(n, op, token, "bs-older", "ACTIVE")
	h.drive(n, op, token, "bs-newer", "ACTIVE")
	h.ok("GET", "/v1/bindings/bs-older/status", nil, "", nil)
	h.ok("GET", "/v1/bindings/bs-newer/status", nil, "", nil)
	h.ok("GET", "/v1/operator/me/nodes", nil, token, nil)
	h.fails("POST", "/v1/auth/revoke", stranger.revocation(t, op.root, stranger.cred.RevocationID, h.now()), "", http.StatusUnauthorized, "DC_BAD_SIGNATURE")
	h.ok("POST", "/v1/auth/revoke", stranger.revocation(t, stranger.root, stranger.cred.RevocationID, h.now()), "", nil)
	h.ok("POST", "/v1/auth/revoke", stranger.revocation(t, stranger.root, stranger.cred.RevocationID, h.now()), "", nil)
	h.fails("POST", "/v1/auth/device-login", stranger.loginRequest(t, h.challenge(), h.now()), "", http.StatusUnauthorized, "DC_REVOKED")
	h.ok("POST", "/v1/auth/logout", nil, token, nil)
	h.fails("POST", "/v1/auth/logout", nil, token, http.StatusUnauthorized, "NO_SESSION")
	h.ok("GET", "/openapi.json", nil, "", nil)
	if err := h.svc.SampleNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.ok("GET", "/v1/network/stats", nil, "", nil)
	h.ok("GET", "/v1/network/stats?changed_since="+canonical.FormatTime(h.now().Add(-time.Hour)), nil, "", nil)
	h.fails("GET", "/v1/network/stats?changed_since=yesterday", nil, "", http.StatusBadRequest, "BAD_REQUEST")
	h.ok("GET", "/nodes?limit=1&changed_since="+canonical.FormatTime(h.now().Add(-time.Hour)), nil, "", nil)
	h.ok("GET", "/api/v1/peers?limit=1", nil, "", nil)

	// The transparency log.
	h.ok("GET", "/log/checkpoint", nil, "", nil)
	h.ok("GET", "/log/key", nil, "", nil)
	h.ok("GET", "/log/tile/entries/000.p/1", nil, "", nil)
	h.ok("GET", "/log/tile/0/000.p/2", nil, "", nil)
	h.fails("GET", "/log/tile/0/x999/000", nil, "", http.StatusNotFound, "NOT_FOUND")
	h.fails("GET", "/log/tile/8/0/000", nil, "", http.StatusNotFound, "NOT_FOUND")

	// The unversioned aliases, and /metrics where a daemon serves it and where it does not.
	h.ok("POST", "/register", n.registration(t, "203.0.113.7:7001"), "", nil)
	h.fails("POST", "/register", bad, "", http.StatusBadRequest, "BAD_REQUEST")
	h.ok("POST", "/heartbeat", n.heartbeat(t, n.did, h.now()), "", nil)
	h.fails("POST", "/heartbeat", stray.heartbeat(t, stray.did, h.now()), "", http.StatusNotFound, "UNKNOWN_DID")
	h.fails("GET", "/metrics", nil, "", http.StatusNotFound, "NOT_FOUND")
	withMetrics := *h
	withMetrics.srv = httptest.NewServer(httpapi.New(h.svc, httpapi.WithMetrics(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write([]byte("# HELP svrpd_nodes Registered node records.\n# TYPE svrpd_nodes gauge\nsvrpd_nodes 2\n"))
	}))))
	defer withMetrics.srv.Close()
	withMetrics.ok("GET", "/metrics", nil, "", nil)

	// Wrong methods and unknown paths answer the error body too.
	h.fails("GET", "/api/v1/register", nil, "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	h.fails("GET", "/v1/dex/pools", nil, "", http.StatusNotFound, "NOT_FOUND")

	openapiDoc.mu.Lock()
	defer openapiDoc.mu.Unlock()
	for path, item := range doc.Paths.Map() {
		for method, o := range item.Operations() {
			seen := openapiDoc.seen[o.OperationID]
			if !seen[http.StatusOK] {
				t.Errorf("%s %s (%s) was never seen answering 200", method, path, o.OperationID)
			}
			clientErrors, seenError := false, false
			for code := range o.Responses.Map() {
				if code[0] == '4' {
					clientErrors = true
				}
			}
			for status := range seen {
				seenError = seenError || status/100 == 4
			}
			if clientErrors && !seenError {
				t.Errorf("%s %s (%s) was never seen answering an error", method, path, o.OperationID)
			}
		}
	}
}
