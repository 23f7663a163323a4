package registry_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
)

func (n node) registrationV2(t *testing.T, endpoint string, ts time.Time) api.RegisterRequest {
	req := n.registration(t, endpoint)
	unix := ts.Unix()
	sig := sign(t, n.priv, canonical.RegisterV2{DID: req.DID, PublicKey: n.key.Base58(), Endpoint: req.Endpoint, Capabilities: req.Capabilities, Region: req.Region, TS: unix})
	req.Signature, req.TS = &sig, &unix
	return req
}

// TestRegisterV2 walks docs/protocol.md §10.1: a v2 registration must verify and be fresh, each must be
// newer than the last, a retry of the last one is answered with the stored record, and a v1
// registration cannot follow.
func TestRegisterV2(t *testing.T) {
	h := newHarness(t)
	n, other := newNode(t, "n"), newNode(t, "other")

	first := n.registrationV2(t, "203.0.113.7:7000", h.now())
	var reg api.RegisterResult
	h.ok("POST", "/api/v1/register", first, "", &reg)
	if !reg.Signed || reg.Data.RegistrationTS == nil || *reg.Data.RegistrationTS != h.now().Unix() {
		t.Fatalf("v2 registration answered %+v", reg.Data)
	}
	firstSeen := reg.Data.LastSeen

	h.clock.Advance(30 * time.Second)
	refused := map[string]struct {
		req    any
		status int
		code   string
	}{
		"unsigned": {func() api.RegisterRequest {
			r := n.registrationV2(t, "203.0.113.8:7000", h.now())
			r.Signature = nil
			return r
		}(), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"signed as v1": {func() api.RegisterRequest {
			r := n.registration(t, "203.0.113.8:7000")
			ts := h.now().Unix()
			r.TS = &ts
			return r
		}(), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"signed over another ts": {func() api.RegisterRequest {
			r := n.registrationV2(t, "203.0.113.8:7000", h.now())
			ts := *r.TS + 1
			r.TS = &ts
			return r
		}(), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"signed by another key": {func() api.RegisterRequest {
			r := n.registrationV2(t, "203.0.113.8:7000", h.now())
			r.Signature = other.registrationV2(t, "203.0.113.8:7000", h.now()).Signature
			return r
		}(), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"301 s behind":          {n.registrationV2(t, "203.0.113.8:7000", h.now().Add(-301*time.Second)), http.StatusUnauthorized, "STALE_TS"},
		"301 s ahead":           {n.registrationV2(t, "203.0.113.8:7000", h.now().Add(301*time.Second)), http.StatusUnauthorized, "STALE_TS"},
		"older than last":       {n.registrationV2(t, "203.0.113.8:7000", h.now().Add(-31*time.Second)), http.StatusUnauthorized, "STALE_TS"},
		"same ts, other fields": {n.registrationV2(t, "203.0.113.8:7000", h.now().Add(-30*time.Second)), http.StatusUnauthorized, "STALE_TS"},
		"v1 after v2, signed":   {n.registration(t, "203.0.113.8:7000"), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"v1 replay of nothing":  {n.registration(t, "203.0.113.7:7000"), http.StatusUnauthorized, "BAD_SIGNATURE"},
		"ts a string":           {toTree(t, n.registrationV2(t, "203.0.113.8:7000", h.now())).withRaw(t, `"1"`, "ts"), http.StatusBadRequest, "BAD_REQUEST"},
		"ts a fraction":         {toTree(t, n.registrationV2(t, "203.0.113.8:7000", h.now())).withRaw(t, `1.5`, "ts"), http.StatusBadRequest, "BAD_REQUEST"},
	}
	for name, c := range refused {
		before := hostileSnapshot(t, h.st)
		h.fails("POST", "/api/v1/register", c.req, "", c.status, c.code)
		hostileSameStore(t, name, before, hostileSnapshot(t, h.st))
	}

	// A retry of the stored registration: 200, the stored record, nothing changes.
	before := hostileSnapshot(t, h.st)
	h.ok("POST", "/api/v1/register", first, "", &reg)
	hostileSameStore(t, "retry", before, hostileSnapshot(t, h.st))
	if reg.Data.LastSeen != firstSeen || reg.Data.Endpoint != "203.0.113.7:7000" {
		t.Fatalf("a retry answered %+v", reg.Data)
	}

	// A newer one moves the endpoint; the older can then never come back.
	second := n.registrationV2(t, "203.0.113.9:7000", h.now())
	h.ok("POST", "/api/v1/register", second, "", &reg)
	if reg.Data.Endpoint != "203.0.113.9:7000" || *reg.Data.RegistrationTS != h.now().Unix() || reg.Data.FirstSeen != firstSeen {
		t.Fatalf("a newer v2 registration answered %+v", reg.Data)
	}
	h.fails("POST", "/api/v1/register", first, "", http.StatusUnauthorized, "STALE_TS")
	if v := h.nodeViewsByKey()[n.key.Hex()]; v.Endpoint != "203.0.113.9:7000" {
		t.Fatalf("the old registration rolled the endpoint back to %s", v.Endpoint)
	}
}

// TestRegisterV1Replay: a v1 registration equal to the stored record changes nothing,
// last_seen included (docs/protocol.md §10.2); one that differs is a re-registration as before, and
// a v2 registration upgrades a v1 record.
func TestRegisterV1Replay(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	reg := n.registration(t, "203.0.113.7:7000")
	h.ok("POST", "/api/v1/register", reg, "", nil)
	seen := stamp(h.now())

	h.clock.Advance(time.Minute)
	before := hostileSnapshot(t, h.st)
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", reg, "", &res)
	hostileSameStore(t, "v1 replay", before, hostileSnapshot(t, h.st))
	if res.Data.LastSeen != seen || !res.Signed {
		t.Fatalf("a replay answered %+v", res)
	}
	// The same fields under the full DID are other signed bytes: a re-registration.
	full := n.registration(t, "203.0.113.7:7000")
	full.DID = n.fullDID()
	sig := sign(t, n.priv, canonical.Register{DID: full.DID, PublicKey: n.key.Base58(), Endpoint: full.Endpoint, Capabilities: full.Capabilities, Region: full.Region})
	full.Signature = &sig
	h.ok("POST", "/api/v1/register", full, "", &res)
	if res.Data.LastSeen != stamp(h.now()) {
		t.Fatalf("a re-registration under another spelling kept last_seen %s", res.Data.LastSeen)
	}
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/register", n.registrationV2(t, "203.0.113.8:7000", h.now()), "", &res)
	if res.Data.RegistrationTS == nil || res.Data.Endpoint != "203.0.113.8:7000" {
		t.Fatalf("a v2 registration over a v1 record answered %+v", res.Data)
	}
}

// TestHeartbeatNeverGoesBack: a replayed heartbeat (equal ts) is 200 with last_seen
// unchanged; an older ts is STALE_TS and changes nothing (docs/protocol.md §10.3).
func TestHeartbeatNeverGoesBack(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	h.ok("POST", "/api/v1/register", n.registration(t, "203.0.113.7:7000"), "", nil)
	h.clock.Advance(time.Minute)
	hb := n.heartbeat(t, n.did, h.now())
	var res api.HeartbeatResult
	h.ok("POST", "/api/v1/heartbeat", hb, "", &res)
	at := res.LastSeen

	h.clock.Advance(time.Minute)
	h.ok("POST", "/api/v1/heartbeat", hb, "", &res)
	if res.LastSeen != at {
		t.Fatalf("a replayed heartbeat answered last_seen %s, want %s", res.LastSeen, at)
	}
	// Under another spelling it is the same key, and the same ts.
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.fullDID(), h.now().Add(-time.Minute)), "", &res)
	if res.LastSeen != at {
		t.Fatalf("the same ts under the full DID moved last_seen to %s", res.LastSeen)
	}
	h.clock.Advance(time.Second)
	if got := h.nodeViewsByKey()[n.key.Hex()].LastSeen; got != at {
		t.Fatalf("after a replay the record says last_seen %s, want %s", got, at)
	}
	h.fails("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now().Add(-62*time.Second)), "", http.StatusUnauthorized, "STALE_TS")
	h.ok("POST", "/api/v1/heartbeat", n.heartbeat(t, n.did, h.now()), "", &res)
	if res.LastSeen == at {
		t.Fatal("a newer heartbeat did not move last_seen")
	}
	// After the marks are swept, the window alone still refuses what they refused.
	h.clock.Advance(11 * time.Minute)
	if err := h.svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.fails("POST", "/api/v1/heartbeat", hb, "", http.StatusUnauthorized, "STALE_TS")
}

// TestRegisterSignatureCap: a registration signature over 256 bytes is 400 before grace mode
// (docs/protocol.md §8); 256 bytes are stored as given.
func TestRegisterSignatureCap(t *testing.T) {
	h := newHarness(t)
	n := newNode(t, "n")
	r := n.registration(t, "203.0.113.7:7000")
	long := strings.Repeat("<", 257)
	r.Signature = &long
	h.fails("POST", "/api/v1/register", r, "", http.StatusBadRequest, "BAD_REQUEST")
	if c, _ := h.svc.NodeCount(t.Context()); c != 0 {
		t.Fatalf("an over-long signature was recorded (%d nodes)", c)
	}
	fits := long[:256]
	r.Signature = &fits
	var res api.RegisterResult
	h.ok("POST", "/api/v1/register", r, "", &res)
	if res.Signed || res.Data.Signature == nil || *res.Data.Signature != fits {
		t.Fatalf("a 256-byte signature was not stored as given: %+v", res.Data)
	}
}

// TestMaxNodes: once the table holds MaxNodes records a new key gets 429 and nothing
// changes; known keys still re-register and heartbeat.
func TestMaxNodes(t *testing.T) {
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, func(c *registry.Config) { c.Limits.MaxNodes = 2; c.Logger = logger })
	a, b, c := newNode(t, "a"), newNode(t, "b"), newNode(t, "c")
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.1:7000"), "", nil)
	h.ok("POST", "/api/v1/register", b.registration(t, "203.0.113.2:7000"), "", nil)
	before := hostileSnapshot(t, h.st)
	for range 5 {
		h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:7000"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	}
	hostileSameStore(t, "over the cap", before, hostileSnapshot(t, h.st))
	h.ok("POST", "/api/v1/register", a.registration(t, "203.0.113.9:7000"), "", nil)
	h.ok("POST", "/api/v1/heartbeat", b.heartbeat(t, b.did, h.now()), "", nil)
	warned := func() int {
		return strings.Count(logs.String(), "level=WARN msg=\"global cap reached; refusing with RATE_LIMITED\" cap=nodes")
	}
	if n := warned(); n != 1 {
		t.Fatalf("5 refusals in one minute logged %d warnings, want 1", n)
	}
	h.clock.Advance(time.Minute)
	h.fails("POST", "/api/v1/register", c.registration(t, "203.0.113.3:7000"), "", http.StatusTooManyRequests, "RATE_LIMITED")
	if n := warned(); n != 2 {
		t.Fatalf("a refusal a minute later logged %d warnings in all, want 2", n)
	}
}
