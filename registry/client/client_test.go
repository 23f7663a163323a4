package client_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

func TestBalanceRefusesUnwiredCredits(t *testing.T) {
	w := newWorld(t)
	op := w.operator(w.client(), "op")

	env, err := op.Credits(t.Context())
	if err != nil {
		t.Fatalf("Credits: %v", err)
	}
	if env.Source != "not_yet_wired" || env.Unit != "test-credit" || !strings.Contains(env.Disclaimer, "not cash") {
		t.Fatalf("credits envelope = %+v", env)
	}

	_, err = op.Balance(t.Context())
	var nyw *client.NotYetWiredError
	if !errors.As(err, &nyw) {
		t.Fatalf("Balance err = %v, want *NotYetWiredError", err)
	}
	if !errors.Is(err, client.ErrNotYetWired) || client.CodeOf(err) != proto.NotYetWired {
		t.Errorf("err = %v: not errors.Is ErrNotYetWired, or code %q", err, client.CodeOf(err))
	}
	if nyw.Level != client.LevelNotYetWired {
		t.Errorf("level = %q, want not_yet_wired", nyw.Level)
	}
	if nyw.Envelope != env {
		t.Errorf("envelope = %+v, want the raw credits view %+v", nyw.Envelope, env)
	}
}

func TestBalanceLevels(t *testing.T) {
	for _, tc := range []struct {
		source, level string
	}{
		{"testing", client.LevelTesting},
		{"planned", client.LevelPlanned},
		{"not_yet_wired", client.LevelNotYetWired},
		{"spreadsheet", client.LevelNotYetWired},
		{"", client.LevelNotYetWired},
		{"ledger", ""},
	} {
		t.Run(tc.source, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" {
					answer(w, 401, `{"code":"NO_SESSION","error":"no"}`)
					return
				}
				answer(w, 200, fmt.Sprintf(`{"operator_did":"did:svrp:o:12345678","unit":"test-credit","disclaimer":"test unit",
					"settled":{"amount":3,"meaning":"s"},"pending":{"amount":2,"meaning":"p"},"estimated":{"amount":1,"meaning":"e"},"source":%q}`, tc.source))
			}))
			defer srv.Close()
			c, _ := client.New(srv.URL)
			op := &client.Operator{Client: c, Token: "tok"}
			bal, err := op.Balance(t.Context())
			if tc.level == "" {
				if err != nil || bal.Settled.Amount != 3 || bal.Source != "ledger" {
					t.Fatalf("ledger balance = %+v, %v", bal, err)
				}
				return
			}
			var nyw *client.NotYetWiredError
			if !errors.As(err, &nyw) || nyw.Level != tc.level || nyw.Envelope.Source != tc.source {
				t.Fatalf("err = %v, want NOT_YET_WIRED at level %q with the envelope", err, tc.level)
			}
			if bal != (api.Credits{}) {
				t.Errorf("a refused balance came back with data: %+v", bal)
			}
		})
	}
}

func TestOnlineWindow(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	ctx := t.Context()
	old := w.registered(c, "old", "192.0.2.1:7000", nil, "")
	w.clock.Advance(2 * time.Minute)
	fresh := w.registered(c, "fresh", "192.0.2.2:7000", nil, "")
	w.clock.Advance(9 * time.Minute) // old was seen 11 minutes ago, fresh 9

	dids := func(ns []api.NodeView) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.DID)
		}
		return out
	}
	for _, tc := range []struct {
		window time.Duration
		want   []string
	}{
		{0, []string{fresh.DID}}, // the default, 10 minutes
		{client.DefaultOnlineWindow, []string{fresh.DID}},
		{12 * time.Minute, []string{old.DID, fresh.DID}},
		{5 * time.Minute, nil},
	} {
		got, err := c.OnlineNodes(ctx, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dids(got), tc.want) {
			t.Errorf("OnlineNodes(%v) = %v, want %v", tc.window, dids(got), tc.want)
		}
	}
	all, err := c.Nodes(ctx, api.NodeFilter{})
	if err != nil || len(all) != 2 {
		t.Fatalf("Nodes = %d records, %v; registered is not online, so both must be listed", len(all), err)
	}
	// A heartbeat brings the old node back, in the listings of the next second at the latest.
	if _, err := old.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Second)
	got, _ := c.OnlineNodes(ctx, 0)
	if len(got) != 2 {
		t.Errorf("after a heartbeat OnlineNodes = %v, want both", dids(got))
	}

	// The boundary: exactly the window is online, a second more is not.
	now := w.clock.Now()
	rec := api.NodeView{LastSeen: canonical.FormatTime(now.Add(-10 * time.Minute))}
	if !client.Online(rec, now, 0) || client.Online(rec, now.Add(time.Second), 0) {
		t.Error("the 10-minute boundary is wrong")
	}
	if client.Online(api.NodeView{LastSeen: "yesterday"}, now, 0) {
		t.Error("a record with a malformed last_seen counted as online")
	}
}

func TestDiscoveryDropsRecordsThatFailIDBinding(t *testing.T) {
	good := testkit.LabelKey(t, "good").Public().(ed25519.PublicKey)
	other := testkit.LabelKey(t, "other").Public().(ed25519.PublicKey)
	gk, _ := didkey.KeyFromEd25519(good)
	ok, _ := didkey.KeyFromEd25519(other)
	gdid, _ := didkey.NodeDID(gk, didkey.FormShort)
	gfull, _ := didkey.NodeDID(gk, didkey.FormFull)
	odid, _ := didkey.NodeDID(ok, didkey.FormShort)

	records := []api.NodeView{
		{DID: gdid.String(), PublicKey: gk.Hex(), Endpoint: "192.0.2.1:1", LastSeen: "2030-01-01T00:00:00Z"},
		{DID: odid.String(), PublicKey: gk.Hex(), Endpoint: "192.0.2.2:1"},     // another key's DID
		{DID: "did:web:example.com", PublicKey: gk.Hex(), Endpoint: "x:1"},     // not did:svrp
		{DID: gfull.String(), PublicKey: gk.Base58(), Endpoint: "192.0.2.3:1"}, // full form, base58 key: fine
		{DID: gdid.String(), PublicKey: "zz", Endpoint: "192.0.2.4:1"},         // key does not decode
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/nodes":
			b, _ := json.Marshal(map[string]any{"count": len(records), "nodes": records})
			answer(w, 200, string(b))
		case "/api/v1/peers":
			b, _ := json.Marshal(map[string]any{"ok": true, "data": records, "error": nil})
			answer(w, 200, string(b))
		case "/peers":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(w, "%s %s 192.0.2.1:1\n", gdid, gk.Base58())
			fmt.Fprintf(w, "%s %s 192.0.2.2:1\n", odid, gk.Base58())
			fmt.Fprintf(w, "a line of garbage\n")
		}
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx := t.Context()

	a, err := c.AuditNodes(ctx, api.NodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, n := range a.Nodes {
		kept = append(kept, n.Endpoint)
	}
	if want := []string{"192.0.2.1:1", "192.0.2.3:1"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	var reasons []string
	for _, r := range a.Rejected {
		reasons = append(reasons, r.Record.Endpoint+"="+string(client.CodeOf(r.Reason)))
	}
	if want := []string{"192.0.2.2:1=ID_BINDING_FAILED", "x:1=ID_BINDING_REQUIRED", "192.0.2.4:1=ID_BINDING_FAILED"}; !slices.Equal(reasons, want) {
		t.Errorf("rejected %v, want %v", reasons, want)
	}

	nodes, err := c.Nodes(ctx, api.NodeFilter{})
	if err != nil || len(nodes) != 2 {
		t.Errorf("Nodes returned %d records (%v), want the 2 id-bound ones", len(nodes), err)
	}
	apiNodes, err := c.APIPeers(ctx, api.NodeFilter{})
	if err != nil || len(apiNodes) != 2 {
		t.Errorf("APIPeers returned %d records (%v), want 2", len(apiNodes), err)
	}
	peers, rejected, err := c.Peers(ctx, api.NodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || peers[0].DID != gdid.String() || peers[0].Endpoint != "192.0.2.1:1" {
		t.Errorf("peers = %+v, want only the id-bound line", peers)
	}
	if len(rejected) != 2 || client.CodeOf(rejected[0].Reason) != proto.IDBindingFailed {
		t.Errorf("rejected peers = %+v, want the foreign DID and the garbage line", rejected)
	}
}

func TestNodeFilterReachesTheRegistry(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	ctx := t.Context()
	a := w.registered(c, "a", "192.0.2.1:7000", []string{"inference", "health:ready"}, "eu")
	w.registered(c, "b", "192.0.2.2:7000", []string{"storage"}, "us")
	got, err := c.Nodes(ctx, api.NodeFilter{Capabilities: []string{"inference"}, Region: "eu"})
	if err != nil || len(got) != 1 || got[0].DID != a.DID {
		t.Fatalf("filtered Nodes = %+v, %v; want only a", got, err)
	}
	if !got[0].SignatureVerified || got[0].Reachability != "public" {
		t.Errorf("record = %+v, want a verified signature and a public endpoint", got[0])
	}
	h, err := c.Health(ctx)
	if err != nil || h.Count != 2 || h.Service != "svrpd" {
		t.Errorf("health = %+v, %v", h, err)
	}
}

func TestBindingJourney(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	nc, oc := w.client(), w.client()
	node := w.node(nc, "node")

	reg, err := node.Register(ctx, "203.0.113.5:7000", []string{"inference"}, "eu")
	if err != nil || !reg.Signed || !reg.IDBound {
		t.Fatalf("register = %+v, %v", reg, err)
	}
	w.clock.Advance(30 * time.Second)
	hb, err := node.Heartbeat(ctx)
	if err != nil || hb.LastSeen != canonical.FormatTime(w.clock.Now()) {
		t.Fatalf("heartbeat = %+v, %v", hb, err)
	}

	session, err := node.Initiate(ctx, client.InitiateOptions{
		DeviceSummary: "test box", OS: "linux", Region: "eu",
		TaskTypes: []string{"inference", "embedding"}, SingleLimit: ptr(10), DailyLimit: ptr(100),
		TTL: 5 * time.Minute,
	})
	if err != nil || session.State != "INITIATED" || len(session.ShortCode) != 8 {
		t.Fatalf("initiate = state %q, %v", session.State, err)
	}

	op := w.operator(oc, "op")
	// Codes are case- and dash-insensitive on input.
	grouped := strings.ToLower(session.ShortCode[:4] + "-" + session.ShortCode[4:])
	view, err := op.Resolve(ctx, grouped)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if view.State != "PENDING_OPERATOR" || view.NodeDID != node.DID ||
		view.NodePublicKeyFingerprint != node.PublicKey().Fingerprint() ||
		!slices.Equal(view.Requested.TaskTypes, []string{"inference", "embedding"}) ||
		*view.Requested.SingleLimit != 10 || *view.Requested.DailyLimit != 100 || *view.OS != "linux" {
		t.Fatalf("resolve view = %+v", view)
	}
	// The code works once.
	if _, err := op.Resolve(ctx, session.ShortCode); !errors.Is(err, &client.Error{ErrorCode: proto.NotFound, Status: 404}) {
		t.Errorf("second resolve err = %v, want 404 NOT_FOUND", err)
	}

	// Nothing waits for the node before the operator authorizes.
	if p, err := node.Pending(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending before authorize = %d, %v", len(p), err)
	}
	terms := client.Requested(view)
	terms.TaskTypes = []string{"inference"}
	terms.DailyLimit = ptr(50)
	st, err := op.Authorize(ctx, view, terms)
	if err != nil || st.State != "PENDING_NODE_ACCEPTANCE" {
		t.Fatalf("authorize = %+v, %v", st, err)
	}

	p, err := node.WaitForAuthorization(ctx, session.BindingSessionID, time.Millisecond)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if p.OperatorDID != op.DID || !slices.Equal(p.AuthorizationCredential.TaskTypes, []string{"inference"}) ||
		*p.AuthorizationCredential.DailyLimit != 50 {
		t.Fatalf("pending authorization = %+v", p)
	}
	if err := node.VerifyPending(p); err != nil {
		t.Fatalf("VerifyPending of a genuine authorization: %v", err)
	}

	// A node refuses, before sending anything, an authorization altered on the way.
	tampered := p
	tampered.AuthorizationCredential.DailyLimit = ptr(1e6)
	before := w.reqs.total()
	if _, err := node.Accept(ctx, tampered); client.CodeOf(err) != proto.BadSignature {
		t.Errorf("accepting a tampered authorization: err = %v, want BAD_SIGNATURE", err)
	}
	if w.reqs.total() != before {
		t.Error("a tampered authorization was sent to the registry")
	}

	// Each link of the chain is checked on the node's side.
	noBind := p
	noBind.DeviceCredential, _ = client.IssueDeviceCredential(testkit.LabelKey(t, "op/root"), op.DeviceKey.Public().(ed25519.PublicKey),
		client.CredentialOptions{IssuedAt: w.clock.Now(), Permissions: []string{"nodes.read"}})
	forged := p
	forged.DeviceCredential.OperatorDID = "did:svrp:o:00000000"
	otherSession := p
	otherSession.BindingSessionID = "another"
	for name, tc := range map[string]struct {
		p    api.PendingAuthorization
		code proto.Code
	}{
		"credential without nodes.bind":    {noBind, proto.PermissionDenied},
		"operator DID of another root":     {forged, proto.DCIDBinding},
		"authorization of another session": {otherSession, proto.BadRequest},
	} {
		if err := node.VerifyPending(tc.p); client.CodeOf(err) != tc.code {
			t.Errorf("%s: VerifyPending err = %v, want %s", name, err, tc.code)
		}
	}

	acc, err := node.Accept(ctx, p)
	if err != nil || acc.State != "ACTIVE" {
		t.Fatalf("accept = %+v, %v", acc, err)
	}
	if acc.Binding.OperatorDID != op.DID || *acc.Binding.DailyLimit != 50 || *acc.Binding.SingleLimit != 10 {
		t.Errorf("binding = %+v", acc.Binding)
	}
	status, err := nc.Status(ctx, session.BindingSessionID)
	if err != nil || status.State != "ACTIVE" || status.OperatorDID == nil || *status.OperatorDID != op.DID {
		t.Errorf("status = %+v, %v", status, err)
	}
	// Success arriving twice.
	if _, err := node.Accept(ctx, p); client.CodeOf(err) != proto.AlreadyActive {
		t.Errorf("second accept err = %v, want ALREADY_ACTIVE", err)
	}

	bound, err := op.Nodes(ctx, 0)
	if err != nil || bound.Count != 1 {
		t.Fatalf("operator nodes = %+v, %v", bound, err)
	}
	bn := bound.Nodes[0]
	if bn.NodeDID != node.DID || !bn.Online || *bn.Authorization.SingleLimit != 10 || *bn.Authorization.DailyLimit != 50 ||
		!slices.Equal(bn.Authorization.TaskTypes, []string{"inference"}) || *bn.Endpoint != "203.0.113.5:7000" {
		t.Errorf("bound node = %+v", bn)
	}
	// The window reaches the registry: 11 minutes later the node is offline by default and
	// online within 15.
	w.clock.Advance(11 * time.Minute)
	if bound, _ := op.Nodes(ctx, 0); bound.Nodes[0].Online {
		t.Error("node seen 11 minutes ago is online in the default window")
	}
	if bound, _ := op.Nodes(ctx, 15*time.Minute); !bound.Nodes[0].Online {
		t.Error("node seen 11 minutes ago is offline in a 15-minute window")
	}

	ev, err := op.Evidence(ctx)
	if err != nil || ev.Count != 0 || ev.Source != "not_yet_wired" || ev.Note == "" {
		t.Errorf("evidence = %+v, %v", ev, err)
	}
}

func TestBindingRefusals(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.client()
	node := w.node(c, "node")
	op := w.operator(c, "op")

	open := func() (api.InitiateResult, api.ResolveView) {
		t.Helper()
		s, err := node.Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"inference"}, SingleLimit: ptr(5)})
		if err != nil {
			t.Fatal(err)
		}
		v, err := op.Resolve(ctx, s.ShortCode)
		if err != nil {
			t.Fatal(err)
		}
		return s, v
	}

	t.Run("operator rejects", func(t *testing.T) {
		s, _ := open()
		st, err := op.Reject(ctx, s.BindingSessionID)
		if err != nil || st.State != "REJECTED_BY_OPERATOR" {
			t.Fatalf("reject = %+v, %v", st, err)
		}
		_, err = node.WaitForAuthorization(ctx, s.BindingSessionID, time.Millisecond)
		var ended *client.SessionEndedError
		if !errors.As(err, &ended) || ended.State != "REJECTED_BY_OPERATOR" {
			t.Errorf("wait err = %v, want the session ended REJECTED_BY_OPERATOR", err)
		}
	})
	t.Run("scope exceeded", func(t *testing.T) {
		_, v := open()
		terms := client.Requested(v)
		terms.SingleLimit = ptr(6)
		_, err := op.Authorize(ctx, v, terms)
		if !errors.Is(err, &client.Error{ErrorCode: proto.ScopeExceeded, Status: 403}) {
			t.Errorf("err = %v, want 403 SCOPE_EXCEEDED", err)
		}
	})
	t.Run("node rejects", func(t *testing.T) {
		s, v := open()
		if _, err := op.Authorize(ctx, v, client.Requested(v)); err != nil {
			t.Fatal(err)
		}
		p, err := node.WaitForAuthorization(ctx, s.BindingSessionID, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		st, err := node.Reject(ctx, p)
		if err != nil || st.State != "REJECTED_BY_NODE" {
			t.Errorf("node reject = %+v, %v", st, err)
		}
	})
	t.Run("node cancels", func(t *testing.T) {
		s, err := node.Initiate(ctx, client.InitiateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := node.Cancel(ctx, s.BindingSessionID)
		if err != nil || st.State != "CANCELLED" {
			t.Errorf("node cancel = %+v, %v", st, err)
		}
		if _, err := node.Cancel(ctx, s.BindingSessionID); client.CodeOf(err) != proto.BadState {
			t.Errorf("second cancel err = %v, want BAD_STATE", err)
		}
	})
	t.Run("operator cancels", func(t *testing.T) {
		s, _ := open()
		st, err := op.Cancel(ctx, s.BindingSessionID)
		if err != nil || st.State != "CANCELLED" {
			t.Errorf("operator cancel = %+v, %v", st, err)
		}
	})
	t.Run("session expires while the node waits", func(t *testing.T) {
		s, err := node.Initiate(ctx, client.InitiateOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(61 * time.Second)
		_, err = node.WaitForAuthorization(ctx, s.BindingSessionID, time.Millisecond)
		var ended *client.SessionEndedError
		if !errors.As(err, &ended) || ended.State != "EXPIRED" {
			t.Errorf("wait err = %v, want the session ended EXPIRED", err)
		}
	})
	t.Run("expired session token", func(t *testing.T) {
		w.clock.Advance(time.Hour + time.Second)
		_, err := op.Credits(ctx)
		if client.CodeOf(err) != proto.SessionExpired {
			t.Errorf("err = %v, want SESSION_EXPIRED", err)
		}
	})
}

func TestClientSideChecks(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	c := w.client()

	t.Run("login with the wrong device key sends nothing", func(t *testing.T) {
		dev := testkit.LabelKey(t, "device")
		cred, err := client.IssueDeviceCredential(testkit.LabelKey(t, "root"), dev.Public().(ed25519.PublicKey), client.CredentialOptions{IssuedAt: w.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		before := w.reqs.total()
		if _, err := c.Login(ctx, testkit.LabelKey(t, "someone else"), cred); client.CodeOf(err) != proto.BadSignature {
			t.Errorf("err = %v, want BAD_SIGNATURE", err)
		}
		if w.reqs.total() != before {
			t.Error("a doomed login burnt a challenge")
		}
	})
	t.Run("a node whose DID is another key's", func(t *testing.T) {
		other := w.node(c, "other")
		n := &client.Node{Client: c, Key: testkit.LabelKey(t, "mine"), DID: other.DID}
		if _, err := n.Register(ctx, "192.0.2.1:1", nil, ""); client.CodeOf(err) != proto.IDBindingFailed {
			t.Errorf("err = %v, want ID_BINDING_FAILED", err)
		}
	})
	t.Run("a view whose fingerprint is not the key's", func(t *testing.T) {
		n := w.node(c, "n")
		v := api.ResolveView{NodeDID: n.DID, NodePublicKey: n.PublicKey().Base58(), NodePublicKeyFingerprint: "0000:0000:0000:0000"}
		if err := client.CheckView(v); client.CodeOf(err) != proto.IDBindingFailed {
			t.Errorf("err = %v, want ID_BINDING_FAILED", err)
		}
		v.NodePublicKeyFingerprint = n.PublicKey().Fingerprint()
		if err := client.CheckView(v); err != nil {
			t.Errorf("a consistent view: %v", err)
		}
	})
	t.Run("the fallback DID form", func(t *testing.T) {
		n, err := client.NewNode(c, testkit.LabelKey(t, "fb"), didkey.FormFallback)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Register(ctx, "192.0.2.9:1", nil, ""); err != nil {
			t.Fatalf("register under the 10-hex DID: %v", err)
		}
		if _, err := n.Heartbeat(ctx); err != nil {
			t.Errorf("heartbeat under the 10-hex DID: %v", err)
		}
	})
}

func TestIssueDeviceCredential(t *testing.T) {
	root, dev := testkit.LabelKey(t, "root"), testkit.LabelKey(t, "device")
	at := time.Date(2030, 5, 6, 7, 8, 9, 500, time.UTC)
	opts := client.CredentialOptions{IssuedAt: at}
	a, err := client.IssueDeviceCredential(root, dev.Public().(ed25519.PublicKey), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := client.IssueDeviceCredential(root, dev.Public().(ed25519.PublicKey), opts)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("issuing is not a pure function of its inputs:\n%+v\n%+v", a, b)
	}
	did, _ := client.OperatorDID(root.Public().(ed25519.PublicKey))
	if a.OperatorDID != did || !strings.HasPrefix(did, "did:svrp:o:") {
		t.Errorf("operator DID = %q, want %q", a.OperatorDID, did)
	}
	if a.IssuedAt != "2030-05-06T07:08:09Z" || a.ExpiresAt != "2031-05-06T07:08:09Z" {
		t.Errorf("validity %s .. %s, want one year from the second of issue", a.IssuedAt, a.ExpiresAt)
	}
	if !slices.Equal(a.Permissions, []string{"nodes.bind"}) {
		t.Errorf("permissions = %v", a.Permissions)
	}
	rk, _ := didkey.KeyFromEd25519(root.Public().(ed25519.PublicKey))
	if err := canonical.Verify(rk, "service", a.DeviceCredential, a.Signature); err != nil {
		t.Errorf("credential does not verify under the root key: %v", err)
	}
	if err := canonical.Verify(rk, "libertynet", a.DeviceCredential, a.Signature); err == nil {
		t.Error("credential verifies under another prefix")
	}
}

func TestSecretsDoNotPrint(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	op := w.operator(c, "op")
	n := w.node(c, "node")
	seedHex := fmt.Sprintf("%x", n.Key.Seed())
	devHex := fmt.Sprintf("%x", op.DeviceKey.Seed())
	for _, s := range []string{
		fmt.Sprint(op), fmt.Sprintf("%v %+v %#v %s", op, op, op, op), fmt.Sprintf("%v %+v %#v", *op, *op, *op),
		fmt.Sprint(n), fmt.Sprintf("%v %+v %#v %s", n, n, n, n), fmt.Sprintf("%v %+v %#v", *n, *n, *n),
		fmt.Sprintf("%v", []any{op, n}),
	} {
		if strings.Contains(s, op.Token) || strings.Contains(s, seedHex) || strings.Contains(s, devHex) ||
			strings.Contains(s, fmt.Sprint([]byte(n.Key))) {
			t.Errorf("printing leaks a secret: %q", s)
		}
	}
	if !strings.Contains(fmt.Sprint(op), op.DID) || !strings.Contains(fmt.Sprint(n), n.DID) {
		t.Error("printing no longer names the identity")
	}
}

// TestRegisterSendsV2: Register signs a ts by default (docs/protocol.md §10.1), a second call in the
// same second still signs a newer one, and RegisterV1 sends message 3, which the registry
// then refuses for a key that registered with v2.
func TestRegisterSendsV2(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	node := w.node(w.client(), "node")
	first, err := node.Register(ctx, "203.0.113.5:7000", nil, "")
	if err != nil || first.Data.RegistrationTS == nil || *first.Data.RegistrationTS != w.clock.Now().Unix() {
		t.Fatalf("register = %+v, %v", first.Data, err)
	}
	second, err := node.Register(ctx, "203.0.113.6:7000", nil, "")
	if err != nil || *second.Data.RegistrationTS != *first.Data.RegistrationTS+1 || second.Data.Endpoint != "203.0.113.6:7000" {
		t.Fatalf("second register in the same second = %+v, %v", second.Data, err)
	}
	node.RegisterV1 = true
	if _, err := node.Register(ctx, "203.0.113.7:7000", nil, ""); client.CodeOf(err) != proto.BadSignature {
		t.Fatalf("a v1 registration after v2 = %v, want BAD_SIGNATURE", err)
	}
	fresh := w.node(w.client(), "fresh")
	fresh.RegisterV1 = true
	if reg, err := fresh.Register(ctx, "203.0.113.8:7000", nil, ""); err != nil || reg.Data.RegistrationTS != nil || !reg.Signed {
		t.Fatalf("v1 register = %+v, %v", reg.Data, err)
	}
}
