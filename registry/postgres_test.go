package registry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
)

// TestEndpointsOnPostgres runs the endpoint tests again with the harness on PostgreSQL, as
// svrpd serves with --postgres: the node cache following the database, challenges consumed
// in the store. It runs when SVRPD_TEST_POSTGRES names a server. Left out: the tests of
// Badger alone or of the in-memory used-set of challenges, which a PostgreSQL registry does
// not use.
func TestEndpointsOnPostgres(t *testing.T) {
	servePostgres(t)
	for _, tt := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Initiate", TestInitiate}, {"InitiateRejects", TestInitiateRejects},
		{"InitiateSessionExists", TestInitiateSessionExists}, {"InitiateOpenSessionLimit", TestInitiateOpenSessionLimit},
		{"ResolveSuccess", TestResolveSuccess}, {"ResolveRequestErrors", TestResolveRequestErrors},
		{"ResolveFailuresIdentical", TestResolveFailuresIdentical}, {"ResolveCodeLimit", TestResolveCodeLimit},
		{"ResolveTokenLimit", TestResolveTokenLimit}, {"ResolveAddressLimit", TestResolveAddressLimit},
		{"ResolveNamingNode", TestResolveNamingNode}, {"ResolveNodeBudget", TestResolveNodeBudget},
		{"ResolveNamedGlobalBudget", TestResolveNamedGlobalBudget}, {"ResolveNamedPerCode", TestResolveNamedPerCode},
		{"ResolveNamedAddressAndOperator", TestResolveNamedAddressAndOperator},
		{"Authorize", TestAuthorize}, {"AuthorizeState", TestAuthorizeState}, {"AuthorizeRejects", TestAuthorizeRejects},
		{"Status", TestStatus}, {"Cancel", TestCancel}, {"OperatorReject", TestOperatorReject},
		{"Pending", TestPending}, {"Accept", TestAccept}, {"NodeReject", TestNodeReject},
		{"Health", TestHealth}, {"Reachability", TestReachability}, {"NodesFilters", TestNodesFilters},
		{"NodesBadFilter", TestNodesBadFilter}, {"NodesOrderKeepsFirstSeen", TestNodesOrderKeepsFirstSeen},
		{"RegisterGraceMode", TestRegisterGraceMode}, {"RegisterNoDowngrade", TestRegisterNoDowngrade},
		{"RegisterStrict", TestRegisterStrict}, {"Reregistration", TestReregistration},
		{"RegisterDIDVectors", TestRegisterDIDVectors}, {"RegisterCollision", TestRegisterCollision},
		{"RegisterAddressLimit", TestRegisterAddressLimit}, {"RegisterBadRequest", TestRegisterBadRequest},
		{"RegisterRejects", TestRegisterRejects}, {"Heartbeat", TestHeartbeat},
		{"EnumerationSameBytes", TestEnumerationSameBytes}, {"EnumerationPerCodeLimit", TestEnumerationPerCodeLimit},
		{"EnumerationPerAddressLimit", TestEnumerationPerAddressLimit},
		{"GraceCannotHijack", TestGraceCannotHijack}, {"GraceUnverifiedThenOwner", TestGraceUnverifiedThenOwner},
		{"GraceStrict", TestGraceStrict}, {"HostileInput", TestHostileInput}, {"HostileRejectVectors", TestHostileRejectVectors},
		{"BindingJourney", TestBindingJourney}, {"ListingFreshness", TestListingFreshness},
		{"Challenge", TestChallenge}, {"DeviceLoginSuccess", TestDeviceLoginSuccess}, {"DeviceLoginCodes", TestDeviceLoginCodes},
		{"DeviceLoginChallengeLife", TestDeviceLoginChallengeLife}, {"DeviceLoginOperatorVectors", TestDeviceLoginOperatorVectors},
		{"DeviceLoginRejects", TestDeviceLoginRejects}, {"OperatorViews", TestOperatorViews},
		{"OperatorViewBodies", TestOperatorViewBodies}, {"OperatorNodesEntries", TestOperatorNodesEntries},
		{"RaceLoginOneChallenge", TestRaceLoginOneChallenge}, {"RaceAcceptOnce", TestRaceAcceptOnce},
		{"RaceResolveOnce", TestRaceResolveOnce}, {"RaceInitiateOneID", TestRaceInitiateOneID},
		{"RaceOpenSessionCap", TestRaceOpenSessionCap}, {"RaceShortDIDCollision", TestRaceShortDIDCollision},
		{"RaceRegisterAddressLimit", TestRaceRegisterAddressLimit}, {"RaceResolveAddressLimit", TestRaceResolveAddressLimit},
		{"RaceSupersede", TestRaceSupersede}, {"Restart", TestRestart}, {"RepairAtStart", TestRepairAtStart},
		{"Sweep", TestSweep}, {"Surface", TestSurface}, {"BodyLimit", TestBodyLimit},
		{"Logout", TestLogout}, {"LoseADevice", TestLoseADevice}, {"RevocationBounds", TestRevocationBounds},
		{"RevocationChecks", TestRevocationChecks}, {"RevokeAuthorizationEndsItsBinding", TestRevokeAuthorizationEndsItsBinding},
		{"RevokedCredentialCannotAuthorize", TestRevokedCredentialCannotAuthorize}, {"SupersededStatus", TestSupersededStatus},
		{"UnbindByNode", TestUnbindByNode}, {"UnbindByOperator", TestUnbindByOperator},
		{"NetworkHistory", TestNetworkHistory}, {"NetworkHistoryBoundedAndKept", TestNetworkHistoryBoundedAndKept},
		{"ListingPages", TestListingsChangedSince},
		{"OperatorPinning", TestOperatorPinning}, {"OperatorPinByRevocation", TestOperatorPinByRevocation},
		{"OperatorPinLoginOrder", TestOperatorPinLoginOrder}, {"OperatorPinAuthorize", TestOperatorPinAuthorize},
		{"LoginVerifiesOnce", TestLoginVerifiesOnce},
		{"RevocationListFair", TestRevocationListFair},
	} {
		t.Run(tt.name, tt.fn)
	}
}

// servePostgres makes the harnesses of the test serve on PostgreSQL, as svrpd does with
// --postgres; without SVRPD_TEST_POSTGRES the test is skipped.
func servePostgres(t *testing.T) {
	pgtest.URL(t)
	onPostgres = true
	t.Cleanup(func() { onPostgres = false })
}

// sharedOnPostgres starts two registries with opts on one PostgreSQL database and one clock,
// as two daemons serving one registry.
func sharedOnPostgres(t *testing.T, opts ...harnessOption) (a, b *harness) {
	t.Helper()
	servePostgres(t)
	dir := t.TempDir()
	c := testkit.NewClock(epoch)
	return startHarness(t, openStore(t, dir), dir, c, opts...), startHarness(t, openStore(t, dir), dir, c, opts...)
}

// TestLoginBudgetsSharedOnPostgres runs two registries on one database: failed logins made
// through either count against one budget, so the limit does not double with the daemons.
func TestLoginBudgetsSharedOnPostgres(t *testing.T) {
	a, b := sharedOnPostgres(t, func(cfg *registry.Config) { cfg.Limits.LoginFailureAddressLimit = 4 })
	op := newOperator(t, "shared-budget", epoch)
	for i, h := range []*harness{a, b, a, b} {
		_, raw := h.do("POST", "/v1/auth/device-login", op.loginRequest(t, "not-a-challenge", epoch), "")
		if !strings.Contains(string(raw), string(proto.BadChallenge)) {
			t.Fatalf("failure %d: %s, want BAD_CHALLENGE", i+1, raw)
		}
	}
	for name, h := range map[string]*harness{"a": a, "b": b} {
		status, raw := h.do("POST", "/v1/auth/device-login", op.loginRequest(t, h.challenge(), epoch), "")
		if status != http.StatusTooManyRequests {
			t.Errorf("login on %s after four failures over two registries: %d %s, want 429", name, status, raw)
		}
	}
}

// TestGlobalCapsSharedOnPostgres runs two registries on one database: the caps on open
// binding sessions and on bearer sessions count what the other added once it has swept (or
// recounted), so a cap does not double with the daemons beyond what one sweep interval adds.
func TestGlobalCapsSharedOnPostgres(t *testing.T) {
	a, b := sharedOnPostgres(t, func(cfg *registry.Config) { cfg.Limits.MaxOpenBindingSessions = 3; cfg.Limits.MaxBearerSessions = 3 })
	ctx := context.Background()
	n := newNode(t, "n")
	id := func(i int) string { return "bs-cap-" + string(rune('a'+i)) }
	for i := range 3 {
		a.ok("POST", "/v1/bindings/initiate", n.initiate(t, id(i), a.now(), nil, nil), "", nil)
	}
	if err := b.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	b.fails("POST", "/v1/bindings/initiate", n.initiate(t, id(3), b.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")
	// A session ended through a registers on b at its next count, and frees its place there.
	a.ok("POST", "/v1/bindings/"+id(0)+"/cancel", n.cancelRequest(t, id(0), n.did, a.now()), "", nil)
	if err := b.svc.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	b.ok("POST", "/v1/bindings/initiate", n.initiate(t, id(3), b.now(), nil, nil), "", nil)
	if err := a.svc.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	a.fails("POST", "/v1/bindings/initiate", n.initiate(t, id(4), a.now(), nil, nil), "", http.StatusTooManyRequests, "RATE_LIMITED")

	op := newOperator(t, "capped", epoch)
	for range 3 {
		op.login(a)
	}
	if err := b.svc.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	status, raw := b.do("POST", "/v1/auth/device-login", op.loginRequest(t, b.challenge(), b.now()), "")
	if status != http.StatusTooManyRequests || !strings.Contains(string(raw), "RATE_LIMITED") {
		t.Errorf("login on b with three bearer sessions made on a: %d %s, want 429 RATE_LIMITED", status, raw)
	}
}

// TestNetworkHistorySharedOnPostgres runs two registries on one database: each samples the
// heartbeats it took, and the history holds their sum, the same read through either.
func TestNetworkHistorySharedOnPostgres(t *testing.T) {
	a, b := sharedOnPostgres(t)
	nodes := a.registerMany("shared", 3)
	a.ok("POST", "/api/v1/heartbeat", nodes[0].heartbeat(t, nodes[0].did, a.now()), "", nil)
	b.ok("POST", "/api/v1/heartbeat", nodes[1].heartbeat(t, nodes[1].did, b.now()), "", nil)
	b.ok("POST", "/api/v1/heartbeat", nodes[2].heartbeat(t, nodes[2].did, b.now()), "", nil)
	a.sample()
	b.sample()
	a.sample() // a's view of b's sample
	for name, h := range map[string]*harness{"a": a, "b": b} {
		s := h.stats()
		if got := points(s.Heartbeats24h); len(got) != 1 || got[0] != 3 {
			t.Errorf("%s: heartbeats %v, want [3] (one through a, two through b)", name, got)
		}
		if got := points(s.Online24h); len(got) != 1 || got[0] != 3 {
			t.Errorf("%s: online %v, want [3]", name, got)
		}
	}
}
