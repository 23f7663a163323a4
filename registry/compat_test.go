package registry_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
)

// The live network's node script posts to the unversioned paths; they are the versioned
// endpoints under a second name.
func TestUnversionedAliases(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "alias node")
	var reg api.RegisterResult
	h.ok("POST", "/register", n.registration(t, "203.0.113.9:7000"), "", &reg)
	if !reg.Registered || !reg.Signed || reg.Data.DID != n.did {
		t.Fatalf("POST /register = %+v, want a signed registration of %s", reg, n.did)
	}
	h.clock.Advance(5e9)
	var hb api.HeartbeatResult
	h.ok("POST", "/heartbeat", n.heartbeat(t, n.did, h.now()), "", &hb)
	if !hb.OK || hb.LastSeen != canonical.FormatTime(h.now()) {
		t.Fatalf("POST /heartbeat = %+v, want ok at %s", hb, canonical.FormatTime(h.now()))
	}
	var list struct {
		Count int            `json:"count"`
		Nodes []api.NodeView `json:"nodes"`
	}
	h.ok("GET", "/nodes", nil, "", &list)
	if list.Count != 1 || list.Nodes[0].LastSeen != hb.LastSeen {
		t.Fatalf("GET /nodes = %+v, want the node seen at %s", list, hb.LastSeen)
	}
	// The aliases refuse what the versioned paths refuse, with the same codes.
	h.fails("POST", "/heartbeat", n.heartbeat(t, n.did, h.now().Add(-10*60e9)), "", http.StatusUnauthorized, "STALE_TS")
	h.fails("GET", "/register", nil, "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
}

// The resolve view carries the node's signature over its description, and an operator's
// client can verify the description with it.
func TestResolveCarriesNodeSignature(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "signed node")
	op := newOperator(t, "sig operator", h.now())
	token := op.login(h)
	f := h.drive(n, op, token, "bs-sig", "PENDING_OPERATOR")
	sent := n.initiate(t, "bs-sig", h.now(), num(10), nil)
	if f.view.NodeSignature != sent.NodeSignature || f.view.CreatedAt != sent.CreatedAt {
		t.Fatalf("view signature %q created_at %q, want what the node sent: %q %q",
			f.view.NodeSignature, f.view.CreatedAt, sent.NodeSignature, sent.CreatedAt)
	}
	if err := client.VerifyDescription(f.view, ""); err != nil {
		t.Fatalf("VerifyDescription of the registry's view: %v", err)
	}
	// A registry that changed what the operator is shown is caught.
	for name, change := range map[string]func(*api.ResolveView){
		"task types":   func(v *api.ResolveView) { v.Requested.TaskTypes = []string{"inference", "mining"} },
		"single limit": func(v *api.ResolveView) { v.Requested.SingleLimit = num(1e6) },
		"region":       func(v *api.ResolveView) { r := "us-east"; v.Region = &r },
		"no signature": func(v *api.ResolveView) { v.NodeSignature = "" },
	} {
		v := f.view
		v.Requested.TaskTypes = append([]string(nil), v.Requested.TaskTypes...)
		change(&v)
		if err := client.VerifyDescription(v, ""); client.CodeOf(err) != proto.BadSignature {
			t.Errorf("%s changed: VerifyDescription = %v, want BAD_SIGNATURE", name, err)
		}
	}
}

// OPTIONS answers what Allow says: 204 on an endpoint with its methods, 404 elsewhere, and
// a 405 names the same methods.
func TestOptionsAgreesWithAllow(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		path, allow string
	}{
		{"/nodes", "GET, OPTIONS"},
		{"/register", "POST, OPTIONS"},
		{"/api/v1/heartbeat", "POST, OPTIONS"},
		{"/v1/bindings/bs-1/status", "GET, OPTIONS"},
		{"/v1/bindings/bs-1/cancel", "POST, OPTIONS"},
		{"/metrics", "GET, OPTIONS"},
	} {
		resp := send(t, h.srv.URL, "OPTIONS", tc.path, nil)
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Allow") != tc.allow {
			t.Errorf("OPTIONS %s = %d, Allow %q; want 204, Allow %q", tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.allow)
		}
	}
	for _, path := range []string{"/nope", "/v1/bindings/bs-1", "/v1/oracle/price"} {
		if resp := send(t, h.srv.URL, "OPTIONS", path, nil); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Allow") != "" {
			t.Errorf("OPTIONS %s = %d, Allow %q; want 404 and no Allow", path, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	resp := send(t, h.srv.URL, "POST", "/v1/bindings/bs-1/status", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, OPTIONS" {
		t.Errorf("POST /v1/bindings/bs-1/status = %d, Allow %q; want 405, Allow \"GET, OPTIONS\"", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// Only the configured origins get CORS headers; a preflight from any other origin is
// answered without them, so the browser refuses the call.
func TestCORS(t *testing.T) {
	h := newHarness(t)
	const console = "https://console.example.net"
	srv := httptest.NewServer(httpapi.New(h.svc, httpapi.WithCORSOrigins(console, "http://localhost:3000")))
	defer srv.Close()
	preflight := func(base, origin string) *http.Response {
		return send(t, base, "OPTIONS", "/v1/bindings/resolve", map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type",
		})
	}

	resp := preflight(srv.URL, console)
	if resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != console ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Errorf("preflight from %s = %d %v; want 204 with its CORS headers", console, resp.StatusCode, resp.Header)
	}
	for _, origin := range []string{"https://evil.example", "https://console.example.net.evil.example", "null"} {
		resp := preflight(srv.URL, origin)
		if resp.StatusCode != http.StatusNoContent || hasCORS(resp) {
			t.Errorf("preflight from %s = %d %v; want 204 without CORS headers", origin, resp.StatusCode, resp.Header)
		}
	}

	if resp := send(t, srv.URL, "GET", "/nodes", map[string]string{"Origin": console}); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != console {
		t.Errorf("GET /nodes from %s = %d, Allow-Origin %q; want 200 and the origin", console, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := send(t, srv.URL, "GET", "/nodes", map[string]string{"Origin": "https://evil.example"}); resp.StatusCode != 200 || hasCORS(resp) {
		t.Errorf("GET /nodes from another origin = %d %v; want 200 without CORS headers", resp.StatusCode, resp.Header)
	}
	// An error answer carries the header too, so the page can read the code.
	if resp := send(t, srv.URL, "GET", "/v1/operator/me/nodes", map[string]string{"Origin": console}); resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != console {
		t.Errorf("GET /v1/operator/me/nodes from %s = %d, Allow-Origin %q; want 401 and the origin", console, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	// No origin is allowed by default.
	if resp := preflight(h.srv.URL, console); resp.StatusCode != http.StatusNoContent || hasCORS(resp) {
		t.Errorf("preflight without configured origins = %d %v; want 204 without CORS headers", resp.StatusCode, resp.Header)
	}
}

func hasCORS(resp *http.Response) bool {
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			return true
		}
	}
	return false
}

// send makes one request with the given headers and returns the answer, body read and closed.
func send(t *testing.T, base, method, path string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
