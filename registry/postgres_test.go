package registry_test

import (
	"testing"

	"github.com/svrp/svrp/internal/pgtest"
)

// TestEndpointsOnPostgres runs the endpoint tests again with the harness on PostgreSQL, as
// svrpd serves with --postgres: the node cache following the database, challenges consumed
// in the store. It runs when SVRPD_TEST_POSTGRES names a server. Left out: the tests of
// Badger alone or of the in-memory used-set of challenges, which a PostgreSQL registry does
// not use.
func TestEndpointsOnPostgres(t *testing.T) {
	pgtest.URL(t)
	onPostgres = true
	defer func() { onPostgres = false }()
	for _, tt := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Initiate", TestInitiate}, {"InitiateRejects", TestInitiateRejects},
		{"InitiateSessionExists", TestInitiateSessionExists}, {"InitiateOpenSessionLimit", TestInitiateOpenSessionLimit},
		{"ResolveSuccess", TestResolveSuccess}, {"ResolveRequestErrors", TestResolveRequestErrors},
		{"ResolveFailuresIdentical", TestResolveFailuresIdentical}, {"ResolveCodeLimit", TestResolveCodeLimit},
		{"ResolveTokenLimit", TestResolveTokenLimit}, {"ResolveAddressLimit", TestResolveAddressLimit},
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
	} {
		t.Run(tt.name, tt.fn)
	}
}
