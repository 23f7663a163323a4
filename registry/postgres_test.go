package registry_test

import (
	"context"
	"flag"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
)

// TestEndpointsOnPostgres runs the endpoint tests again with the harness on PostgreSQL, as
// svrpd serves with --postgres: the node cache following the database, challenges consumed
// in the store. It runs when SVRPD_TEST_POSTGRES names a server. Left out: the tests of
// Badger alone or of the in-memory used-set of challenges, which a PostgreSQL registry does
// not use.
//
// The tests run side by side, each on schemas of its own, as many at once as the server's
// free connections allow (pgtest.Slots) up to pgTestsAtOnce: one after another, waiting for
// PostgreSQL's round trips, they made the longest test of the package. They run from
// goroutines rather than with t.Parallel, whose bound (-parallel) is the number of processors
// and not what a server that answers over a socket can take.
func TestEndpointsOnPostgres(t *testing.T) {
	servePostgres(t)
	slots := make(chan struct{}, pgtest.Slots(t, pgTestConns(), pgTestsAtOnce))
	var wg sync.WaitGroup
	for _, tt := range []struct {
		name string
		fn   func(*testing.T)
	}{
		// The longest first, so that the short ones fill the slots beside them rather than
		// leave one running alone at the end.
		{"HostileInput", TestHostileInput}, {"NetworkHistoryBoundedAndKept", TestNetworkHistoryBoundedAndKept},
		{"HostileRejectVectors", TestHostileRejectVectors}, {"OperatorPinLoginOrder", TestOperatorPinLoginOrder},
		{"RegisterCollision", TestRegisterCollision},
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
		{"RegisterDIDVectors", TestRegisterDIDVectors},
		{"RegisterAddressLimit", TestRegisterAddressLimit}, {"RegisterBadRequest", TestRegisterBadRequest},
		{"RegisterRejects", TestRegisterRejects}, {"Heartbeat", TestHeartbeat},
		{"EnumerationSameBytes", TestEnumerationSameBytes}, {"EnumerationPerCodeLimit", TestEnumerationPerCodeLimit},
		{"EnumerationPerAddressLimit", TestEnumerationPerAddressLimit},
		{"GraceCannotHijack", TestGraceCannotHijack}, {"GraceUnverifiedThenOwner", TestGraceUnverifiedThenOwner},
		{"GraceStrict", TestGraceStrict},
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
		{"UnbindByNode", TestUnbindByNode}, {"UnbindByOperator", TestUnbindByOperator}, {"UnseenBoundNode", TestUnseenBoundNode},
		{"NetworkHistory", TestNetworkHistory},
		{"ListingPages", TestListingsChangedSince},
		{"OperatorPinning", TestOperatorPinning}, {"OperatorPinSquatting", TestOperatorPinSquatting},
		{"OperatorPinWrittenByRevocation", TestOperatorPinWrittenByRevocation}, {"RevokedUnderEitherSpelling", TestRevokedUnderEitherSpelling},
		{"OperatorPinAuthorize", TestOperatorPinAuthorize},
		{"LoginVerifiesOnce", TestLoginVerifiesOnce},
		{"RevocationListFair", TestRevocationListFair},
	} {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			t.Run(tt.name, tt.fn)
		}()
	}
	wg.Wait()
}

// pgTestConns is the most connections one endpoint test on PostgreSQL holds: it has at
// most two stores open at once (two registries on one database, or a restart's), or one per
// parallel subtest (TestHostileInput's groups, as many at once as -parallel), each with a
// pool of pgx's default size; and one connection that creates or drops its schema.
func pgTestConns() int {
	stores := 2
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil {
			stores = max(stores, n)
		}
	}
	return stores*max(4, runtime.NumCPU()) + 1
}

// pgTestsAtOnce bounds the endpoint tests run side by side: they wait on the server's round
// trips, which overlap, but each also needs the processor, under the race detector several
// times over, and beyond a few at once they only queue for it, holding memory meanwhile.
const pgTestsAtOnce = 4

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
	other := newOperator(t, "other", epoch)
	status, raw := b.do("POST", "/v1/auth/device-login", other.loginRequest(t, b.challenge(), b.now()), "")
	if status != http.StatusTooManyRequests || !strings.Contains(string(raw), "RATE_LIMITED") {
		t.Errorf("another operator's login on b with three bearer sessions made on a: %d %s, want 429 RATE_LIMITED", status, raw)
	}
	// The operator who holds them logs in again on b, ending one of its own.
	b.ok("POST", "/v1/auth/device-login", op.loginRequest(t, b.challenge(), b.now()), "", nil)
}

// TestRegisterRetrySharedOnPostgres runs two registries on one database, as daemons behind one
// address: a registration committed through a and sent again through b, as by a client whose
// answer was lost with a's process, is answered with the stored record rather than refused as
// a collision of its own short DID, and the key then registers through either under each of
// its spellings. The short-body check compares keys read in the write's transaction, never a
// daemon's memory or a DID's spelling.
func TestRegisterRetrySharedOnPostgres(t *testing.T) {
	a, b := sharedOnPostgres(t)
	n := newNode(t, "retried")
	first := n.registrationV2(t, "203.0.113.7:7000", a.now())
	var stored, retried api.RegisterResult
	a.ok("POST", "/api/v1/register", first, "", &stored)
	a.clock.Advance(time.Second)
	b.ok("POST", "/api/v1/register", first, "", &retried)
	if retried.Data.LastSeen != stored.Data.LastSeen || retried.Data.Endpoint != stored.Data.Endpoint || retried.Data.DID != n.did {
		t.Fatalf("the retry through b answered %+v, want the record stored through a, %+v", retried.Data, stored.Data)
	}

	fallback, _ := didkey.NodeDID(n.key, didkey.FormFallback)
	for i, step := range []struct {
		h   *harness
		did string
	}{{b, fallback.String()}, {a, n.fullDID()}, {b, n.did}, {a, n.did}} {
		a.clock.Advance(time.Second)
		spelled := n
		spelled.did = step.did
		var reg api.RegisterResult
		step.h.ok("POST", "/api/v1/register", spelled.registrationV2(t, "203.0.113.8:7000", a.now()), "", &reg)
		if reg.Data.DID != step.did || reg.Data.FirstSeen != stored.Data.FirstSeen {
			t.Fatalf("registration %d, under %s: answered %+v", i+1, step.did, reg.Data)
		}
	}
	if got := len(b.listedNodes()); got != 1 {
		t.Errorf("b lists %d records of one key, want 1", got)
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
