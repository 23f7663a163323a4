package registry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/httpapi"
)

// endpoint is one route of the API.
type endpoint struct{ method, path string }

// implemented lists every endpoint the description marks Implemented or Not yet wired, plus
// the operator reject of the protocol; "{id}" is replaced by an existing session id.
var implemented = []endpoint{
	{"GET", "/health"},
	{"GET", "/nodes"},
	{"GET", "/peers"},
	{"GET", "/api/v1/peers"},
	{"POST", "/api/v1/register"},
	{"POST", "/api/v1/heartbeat"},
	{"POST", "/v1/auth/challenge"},
	{"POST", "/v1/auth/device-login"},
	{"GET", "/v1/operator/me/nodes"},
	{"GET", "/v1/operator/me/credits"},
	{"GET", "/v1/operator/me/evidence"},
	{"POST", "/v1/bindings/initiate"},
	{"POST", "/v1/bindings/resolve"},
	{"POST", "/v1/bindings/authorize"},
	{"GET", "/v1/bindings/{id}/status"},
	{"POST", "/v1/bindings/{id}/cancel"},
	{"POST", "/v1/bindings/{id}/reject"},
	{"POST", "/v1/node/bindings/pending"},
	{"POST", "/v1/node/bindings/{id}/accept"},
	{"POST", "/v1/node/bindings/{id}/reject"},
	// Aliases the live network's node script uses.
	{"POST", "/register"},
	{"POST", "/heartbeat"},
}

// planned lists the paths the description marks Planned: nothing stands behind them.
var planned = []string{"/v1/oracle/price", "/v1/oracle/report", "/v1/dex/intent", "/v1/dex/quote", "/v1/dex/solve", "/v1/dex/pools"}

// send sends a request without credentials and returns the status, the Content-Type and
// the body.
func (h *harness) send(method, path string, body []byte) (int, string, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	resp, raw := testkit.Do(h.t, h.srv.Client(), req)
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
}

// wantError checks that an answer is the JSON error body with status and code.
func wantError(t *testing.T, what string, status int, contentType string, raw []byte, wantStatus int, code string) {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil || status != wantStatus || contentType != "application/json" ||
		e["code"] != code || len(e) != 2 || e["error"] == "" {
		t.Errorf("%s: %d %s %s, want %d JSON {code: %s, error}", what, status, contentType, raw, wantStatus, code)
	}
}

func surfacePath(path string) string { return strings.ReplaceAll(path, "{id}", "bs-surface") }

// TestSurface: every implemented endpoint answers its method and OPTIONS, every other
// method gets 405, and the Planned paths and other unknown routes get 404, all with JSON error bodies.
func TestSurface(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-surface", h.now(), nil, nil), "", nil)

	for _, e := range implemented {
		t.Run(e.method+" "+e.path, func(t *testing.T) {
			h := h.in(t)
			path := surfacePath(e.path)
			var body []byte
			if e.method == "POST" {
				body = []byte("{}")
			}
			status, _, raw := h.send(e.method, path, body)
			if status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status >= 500 {
				t.Fatalf("%s %s: %d %s", e.method, path, status, raw)
			}
			if status, _, _ := h.send("OPTIONS", path, nil); status != http.StatusNoContent {
				t.Errorf("OPTIONS %s: %d, want 204", path, status)
			}
			for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"} {
				if m == e.method {
					continue
				}
				status, ct, raw := h.send(m, path, nil)
				if m == "HEAD" {
					// A HEAD answer has no body to check.
					if status != http.StatusMethodNotAllowed {
						t.Errorf("HEAD %s: %d", path, status)
					}
					continue
				}
				wantError(t, m+" "+path, status, ct, raw, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
			}
		})
	}

	for _, path := range planned {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			status, ct, raw := h.send(m, path, []byte("{}"))
			wantError(t, m+" "+path, status, ct, raw, http.StatusNotFound, "NOT_FOUND")
		}
	}

	for _, e := range []endpoint{
		{"GET", "/"},
		{"GET", "/v1"},
		{"GET", "/nodes/"},
		{"GET", "/health/"},
		{"GET", "/api/v2/peers"},
		{"GET", "/v1/operator/me"},
		{"GET", "/v1/operator/me/balance"},
		{"POST", "/v1/bindings"},
		{"POST", "/v1/bindings/"},
		{"POST", "/v1/bindings/start"},
		{"GET", "/v1/bindings/start"},
		{"DELETE", "/v1/bindings/bs-surface"},
		{"POST", "/v1/bindings/bs-surface/accept"},
		{"GET", "/v1/bindings/bs-surface/accept"},
		{"GET", "/v1/bindings/bs-surface/status/more"},
		{"POST", "/v1/node/bindings/poll"},
		{"GET", "/v1/node/bindings/poll"},
		{"POST", "/v1/node/bindings/bs-surface/cancel"},
		{"PUT", "/v1/node/bindings/bs-surface/cancel"},
		{"POST", "/v1/node/bindings/bs-surface/accept/now"},
		{"GET", "/v1/oracle"},
		{"GET", "/v1/dex"},
		{"POST", "/v1/wallet/transfer"},
	} {
		status, ct, raw := h.send(e.method, e.path, []byte("{}"))
		wantError(t, e.method+" "+e.path, status, ct, raw, http.StatusNotFound, "NOT_FOUND")
	}
}

// TestBodyLimit: a body over 64 KiB gets 413 from every endpoint that reads one; a body of
// exactly 64 KiB is read.
func TestBodyLimit(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-surface", h.now(), nil, nil), "", nil)
	huge := append([]byte(`{"pad":"`), bytes.Repeat([]byte("a"), httpapi.MaxBodyBytes)...)
	huge = append(huge, `"}`...)
	token := newOperator(t, "op", h.now(), "nodes.bind").login(h)
	for _, e := range implemented {
		if e.method != "POST" || e.path == "/v1/bindings/{id}/reject" {
			continue
		}
		path := surfacePath(e.path)
		status, ct, raw := h.send(e.method, path, huge)
		wantError(t, "POST "+path, status, ct, raw, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
		// The size is checked before the bearer.
		if e.path == "/v1/bindings/resolve" || e.path == "/v1/bindings/authorize" {
			h.fails("POST", path, huge, token, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
		}
	}

	reg, err := json.Marshal(n.registration(t, "203.0.113.7:7000"))
	if err != nil {
		t.Fatal(err)
	}
	exact := append(reg, bytes.Repeat([]byte(" "), httpapi.MaxBodyBytes-len(reg))...)
	if len(exact) != httpapi.MaxBodyBytes || httpapi.MaxBodyBytes != 64<<10 {
		t.Fatalf("body of %d bytes", len(exact))
	}
	h.ok("POST", "/api/v1/register", exact, "", nil)
	h.fails("POST", "/api/v1/register", append(exact, ' '), "", http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	if got := len(h.listedNodes()); got != 1 {
		t.Fatalf("%d records", got)
	}
}
