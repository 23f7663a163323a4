package registry_test

import (
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mr-tron/base58"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store/badger"
)

// TestLogsKeepNoSecret runs a whole journey, with its usual failures, under a debug logger
// of each format the daemon offers, the store logging to it too as svrpd wires it, and
// checks that no seed, bearer token, challenge, short code (in any spelling the registry
// accepts) or binding token reaches the log.
func TestLogsKeepNoSecret(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var out testkit.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var logger *slog.Logger
			if format == "json" {
				logger = slog.New(slog.NewJSONHandler(&out, opts))
			} else {
				logger = slog.New(slog.NewTextHandler(&out, opts))
			}
			dir := t.TempDir()
			st, err := badger.Open(dir, badger.WithLogger(logger))
			if err != nil {
				t.Fatal(err)
			}
			h := startHarness(t, st, dir, testkit.NewClock(epoch), func(c *registry.Config) { c.Logger = logger })
			secrets := logsJourney(t, h)
			h.close()
			log := out.String()
			if !strings.Contains(log, "request") || !strings.Contains(log, "/v1/bindings/resolve") {
				t.Fatalf("the debug log has no request lines:\n%s", log)
			}
			for name, s := range secrets {
				if s != "" && strings.Contains(log, s) {
					t.Errorf("the log contains %s %q", name, s)
				}
			}
			t.Logf("%d log lines checked for %d secrets", strings.Count(log, "\n"), len(secrets))
		})
	}
}

// logsJourney drives registration, login, the binding handshake and the failures around
// them, and returns every secret that went over the wire, by name.
func logsJourney(t *testing.T, h *harness) map[string]string {
	n := newNode(t, "node")
	op := newOperator(t, "op", h.now(), "nodes.bind")
	secrets := map[string]string{}
	for name, seed := range map[string][]byte{"node seed": n.priv.Seed(), "root seed": op.root.Seed(), "device seed": op.device.Seed()} {
		secrets[name+" (hex)"] = hex.EncodeToString(seed)
		secrets[name+" (base58)"] = base58.Encode(seed)
		secrets[name+" (raw)"] = string(seed)
	}
	secrets["node private key (hex)"] = hex.EncodeToString(n.priv)

	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", nil)

	ch := h.challenge()
	secrets["challenge"] = ch
	bad := op.loginRequest(t, ch, h.now())
	bad.Signature = bad.DeviceCredential.Signature
	h.fails("POST", "/v1/auth/device-login", bad, "", http.StatusUnauthorized, "BAD_SIGNATURE")
	h.fails("POST", "/v1/auth/device-login", op.loginRequest(t, ch, h.now()), "", http.StatusUnauthorized, "BAD_CHALLENGE")
	ch = h.challenge()
	secrets["second challenge"] = ch
	var login api.LoginResult
	h.ok("POST", "/v1/auth/device-login", op.loginRequest(t, ch, h.now()), "", &login)
	token := login.SessionToken
	secrets["bearer token"] = token
	h.ok("GET", "/v1/operator/me/credits", nil, token, nil)
	h.fails("GET", "/v1/operator/me/nodes", nil, token+"x", http.StatusUnauthorized, "NO_SESSION")

	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-log", h.now(), num(10), nil), "", &ini)
	code := ini.ShortCode
	for name, v := range map[string]string{
		"short code": code, "short code (lower case)": strings.ToLower(code),
		"short code (dashed)": code[:4] + "-" + code[4:], "short code (lower, dashed)": strings.ToLower(code[:4] + "-" + code[4:]),
		"short code (spaced)": code[:4] + " " + code[4:], "binding token": ini.BindingToken,
	} {
		secrets[name] = v
	}
	// Failed resolves with near-miss spellings, then a bad bearer, then the real one.
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code[:7] + hostileNextSymbol(code[7])}, token, http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: strings.ToLower(code)}, "nope", http.StatusUnauthorized, "NO_SESSION")
	var view api.ResolveView
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: strings.ToLower(code[:4] + "-" + code[4:])}, token, &view)
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: code}, token, http.StatusNotFound, "NOT_FOUND")
	h.fails("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, token, http.StatusNotFound, "NOT_FOUND")

	h.ok("POST", "/v1/bindings/authorize", op.authorize(t, view, h.now(), num(5), num(50)), token, nil)
	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	acc := n.acceptance(t, pend.Pending[0], true, h.now())
	broken := acc
	broken.Acceptance.Signature = acc.Acceptance.Signature[:20]
	h.fails("POST", "/v1/node/bindings/bs-log/accept", broken, "", http.StatusUnauthorized, "BAD_SIGNATURE")
	h.ok("POST", "/v1/node/bindings/bs-log/accept", acc, "", nil)
	h.ok("GET", "/v1/operator/me/nodes", nil, token, nil)

	// A second session, resolved by its token and cancelled by the operator.
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-log-2", h.now(), nil, nil), "", &ini)
	secrets["second short code"] = ini.ShortCode
	secrets["second binding token"] = ini.BindingToken
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{BindingToken: ini.BindingToken}, token, nil)
	h.ok("POST", "/v1/bindings/bs-log-2/cancel", nil, token, nil)

	// Requests that are refused before any check, which log too.
	h.fails("POST", "/v1/bindings/resolve", "short_code="+code, token, http.StatusBadRequest, "BAD_REQUEST")
	h.fails("GET", "/v1/oracle/price?code="+code, nil, token, http.StatusNotFound, "NOT_FOUND")
	return secrets
}
