package registry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/registry/api"
)

// TestBindingJourney drives the whole handshake over HTTP against Badger: register,
// heartbeat, login, initiate → resolve → authorize → pending → accept → ACTIVE, then the
// operator lists the node online with its limits, and finds it by key when it heartbeats
// under its full DID.
func TestBindingJourney(t *testing.T) {
	t.Run("node cache", func(t *testing.T) { journey(t, newHarness(t)) })
	t.Run("plain store", func(t *testing.T) { journey(t, newPlainHarness(t)) })
}

func journey(t *testing.T, h *harness) {
	n := newNode(t, "node")
	op := newOperator(t, "op", h.now(), "nodes.bind")

	var reg api.RegisterResult
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", &reg)
	if !reg.Signed || !reg.Data.SignatureVerified || reg.Data.Reachability != "public" {
		t.Fatalf("registration: %+v", reg)
	}
	h.clock.Advance(30 * time.Second)
	var hb api.HeartbeatResult
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", &hb)
	if want := h.now().Format(time.RFC3339); hb.LastSeen != want {
		t.Fatalf("last_seen %s, want %s", hb.LastSeen, want)
	}

	token := op.login(h)

	var ini api.InitiateResult
	h.ok("POST", "/v1/bindings/initiate", n.initiate(t, "bs-1", h.now(), num(10), nil), "", &ini)
	if ini.State != "INITIATED" || len(ini.ShortCode) != 8 || ini.BindingToken == "" {
		t.Fatalf("initiate: %+v", ini)
	}

	var view api.ResolveView
	// The operator may type the code in lower case with a dash: it is normalised.
	typed := ini.ShortCode[:4] + "-" + ini.ShortCode[4:]
	h.ok("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: typed}, token, &view)
	if view.State != "PENDING_OPERATOR" || view.NodePublicKeyFingerprint != n.key.Fingerprint() || view.NodeDID != n.did {
		t.Fatalf("resolve: %+v", view)
	}

	var st api.StateResult
	h.ok("POST", "/v1/bindings/authorize", op.authorize(t, view, h.now(), num(5), num(50)), token, &st)
	if st.State != "PENDING_NODE_ACCEPTANCE" {
		t.Fatalf("authorize: %+v", st)
	}

	var pend api.PendingResult
	h.ok("POST", "/v1/node/bindings/pending", n.poll(t, h.now()), "", &pend)
	if len(pend.Pending) != 1 || pend.Pending[0].OperatorDID != op.did {
		t.Fatalf("pending: %+v", pend)
	}

	var acc api.AcceptResult
	h.ok("POST", "/v1/node/bindings/bs-1/accept", n.acceptance(t, pend.Pending[0], true, h.now()), "", &acc)
	if acc.State != "ACTIVE" || acc.Binding.OperatorDID != op.did || *acc.Binding.SingleLimit != 5 {
		t.Fatalf("accept: %+v", acc)
	}

	var status api.Status
	h.ok("GET", "/v1/bindings/bs-1/status", nil, "", &status)
	if status.State != "ACTIVE" || status.OperatorDID == nil || *status.OperatorDID != op.did {
		t.Fatalf("status: %+v", status)
	}

	// A second accept is success arriving twice.
	h.fails("POST", "/v1/node/bindings/bs-1/accept", n.acceptance(t, pend.Pending[0], true, h.now()), "", http.StatusConflict, "ALREADY_ACTIVE")

	// The node heartbeats under its full DID; the operator's view finds it by key.
	h.clock.Advance(2 * time.Minute)
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), h.now()), "", nil)

	var mine api.OperatorNodes
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &mine)
	seen := h.now().Format(time.RFC3339)
	endpoint, region := "203.0.113.7:7000", "eu-west"
	want := api.OperatorNodes{OperatorDID: op.did, Count: 1, Nodes: []api.BoundNode{{
		NodeDID: n.did, BindingSessionID: "bs-1", Online: true, LastSeen: &seen, Endpoint: &endpoint, Region: &region,
		Capabilities: []string{"inference"},
		Authorization: api.BoundTerms{
			TaskTypes: []string{"inference"}, SingleLimit: num(5), DailyLimit: num(50),
			RevocationID: "authz-bs-1", ActivatedAt: acc.Binding.ActivatedAt,
		},
	}}}
	if d := cmp.Diff(want, mine); d != "" {
		t.Fatalf("operator nodes (-want +got):\n%s", d)
	}

	// Eleven minutes of silence: still bound, no longer online.
	h.clock.Advance(11 * time.Minute)
	h.ok("GET", "/v1/operator/me/nodes", nil, token, &mine)
	if mine.Count != 1 || mine.Nodes[0].Online {
		t.Fatalf("after 11 minutes: %+v", mine.Nodes)
	}
	h.ok("GET", "/v1/operator/me/nodes?online_within=3600", nil, token, &mine)
	if !mine.Nodes[0].Online {
		t.Fatalf("online_within=3600 should count the node online")
	}
}
