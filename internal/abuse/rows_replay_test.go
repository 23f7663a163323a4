package abuse

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/limits"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/api"
)

// replayers is how many source addresses send each replay.
const replayers = 200

// replayFromEverywhere sends body to path once from each of replayers addresses, from the
// first-th attacker address on, and returns the answers, while the honest node heartbeats;
// every honest heartbeat must succeed, and at least one is sent during the replays.
func replayFromEverywhere(t *testing.T, d *daemon, h *steady, path string, body any, first int) []attack.Answer {
	t.Helper()
	answers := make([]attack.Answer, replayers)
	var beat atomic.Int32
	stop := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for {
			if _, err := h.node.Heartbeat(t.Context()); err != nil {
				t.Errorf("an honest heartbeat during the replays: %v", err)
			}
			beat.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	for beat.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	parallel(replayers, 16, func(i int) {
		answers[i] = d.send(t, from(addr(first+i)), "POST", path, body)
	})
	close(stop)
	<-beats
	return answers
}

// Row 7: a registration copied from GET /nodes (fields and signature are public) and posted
// again from anywhere changes nothing, last_seen included; an older v2 registration cannot
// roll the endpoint back, nor can a v1 one once the key registered with v2.
func TestRow7RegistrationReplay(t *testing.T) {
	d := start(t)
	h := newSteady(t, d)

	// A node that registers the v1 way, as the live network's clients do.
	legacy := nodeKey("legacy")
	if a := d.send(t, http.DefaultClient, "POST", "/api/v1/register", legacy.registration(t, "203.0.113.7:7000")); a.Status != http.StatusOK {
		t.Fatalf("legacy node registers: %s", a)
	}
	before := d.node(t, legacy.key)
	time.Sleep(1100 * time.Millisecond) // last_seen has one-second precision
	copied := attack.Copied(before)
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", copied, 0) {
		if a.Status != http.StatusOK {
			t.Fatalf("replay %d from %s: %s, want 200 with the stored record", i, addr(i), a)
		}
	}
	if after := d.node(t, legacy.key); after.LastSeen != before.LastSeen {
		t.Fatalf("%d replays moved last_seen from %s to %s: a dead node would look online", replayers, before.LastSeen, after.LastSeen)
	}

	// A node that registers with v2 moves from endpoint A to B; A's registration comes back.
	mover := nodeKey("mover")
	now := time.Now().Unix()
	atA := mover.registrationV2(t, "203.0.113.10:7000", now-10)
	atB := mover.registrationV2(t, "203.0.113.11:7000", now-5)
	for _, r := range []api.RegisterRequest{atA, atB} {
		if a := d.send(t, http.DefaultClient, "POST", "/api/v1/register", r); a.Status != http.StatusOK {
			t.Fatalf("mover registers: %s", a)
		}
	}
	moved := d.node(t, mover.key)
	time.Sleep(1100 * time.Millisecond)
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", atA, 0) {
		if a.Status != http.StatusUnauthorized || a.Code != "STALE_TS" {
			t.Fatalf("old registration replayed from %s: %s, want 401 STALE_TS", addr(i), a)
		}
	}
	asV1 := mover.registration(t, "203.0.113.10:7000")
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", asV1, 0) {
		if a.Status != http.StatusUnauthorized || a.Code != "BAD_SIGNATURE" {
			t.Fatalf("v1 registration after v2 from %s: %s, want 401 BAD_SIGNATURE", addr(i), a)
		}
	}
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", atB, 0) {
		if a.Status != http.StatusOK {
			t.Fatalf("the last registration replayed from %s: %s, want 200 with the stored record", addr(i), a)
		}
	}
	if after := d.node(t, mover.key); after.Endpoint != moved.Endpoint || after.LastSeen != moved.LastSeen || *after.RegistrationTS != now-5 {
		t.Fatalf("after the replays the record is %+v, was %+v", after, moved)
	}
}

// Row 8: a captured heartbeat replayed by a third party within the ±300 s window changes
// nothing; an older one is refused. Replays from other addresses than the node's have a
// budget per address and block: 200 addresses of one /24 each sending one get the block's
// budget answered, the rest 429, while the node's own heartbeats, its own retries and its
// next heartbeat sent from the spent block are all accepted.
func TestRow8HeartbeatReplay(t *testing.T) {
	d := start(t)
	h := newSteady(t, d)
	n := nodeKey("beating")
	if a := d.send(t, http.DefaultClient, "POST", "/api/v1/register", n.registrationV2(t, "203.0.113.20:7000", time.Now().Unix())); a.Status != http.StatusOK {
		t.Fatalf("node registers: %s", a)
	}
	time.Sleep(1100 * time.Millisecond)
	captured := n.heartbeat(t, time.Now().Unix())
	a := d.send(t, http.DefaultClient, "POST", "/api/v1/heartbeat", captured)
	if a.Status != http.StatusOK {
		t.Fatalf("heartbeat: %s", a)
	}
	before := d.node(t, n.key)
	time.Sleep(1100 * time.Millisecond)

	limits := limits.DefaultLimits()
	blockBudget := limits.HeartbeatReplayAddressLimit * limits.AddressBlockFactor
	refusedInAll := 0
	for _, c := range []struct {
		what  string
		body  api.HeartbeatRequest
		first int // the first attacker address: each case from a /24 of its own
		ok    func(attack.Answer) bool
		want  string
	}{
		{"a replay", captured, 0, func(a attack.Answer) bool {
			return a.Status == http.StatusOK && jsonHas(a.Body, "last_seen", before.LastSeen)
		}, "200 with last_seen " + before.LastSeen},
		{"an older heartbeat", n.heartbeat(t, captured.TS-1), 250, func(a attack.Answer) bool {
			return a.Status == http.StatusUnauthorized && a.Code == "STALE_TS"
		}, "401 STALE_TS"},
	} {
		answered, refused := 0, 0
		for i, a := range replayFromEverywhere(t, d, h, "/api/v1/heartbeat", c.body, c.first) {
			switch {
			case c.ok(a):
				answered++
			case a.Status == http.StatusTooManyRequests && a.Code == "RATE_LIMITED":
				refused++
			default:
				t.Fatalf("%s from %s: %s, want %s or 429 RATE_LIMITED", c.what, addr(c.first+i), a, c.want)
			}
		}
		// Replays in flight at once may pass the budget by as many.
		if answered < blockBudget || refused == 0 {
			t.Fatalf("%s from %d addresses of one /24: %d answered and %d refused, want the block's %d answered and the rest refused",
				c.what, replayers, answered, refused, blockBudget)
		}
		refusedInAll += refused
	}
	if got := refusals(t, d, budget.LimitHeartbeatReplaysPerBlock); got != refusedInAll {
		t.Errorf("the daemon counts %d refusals by %s, want %d", got, budget.LimitHeartbeatReplaysPerBlock, refusedInAll)
	}
	if after := d.node(t, n.key); after.LastSeen != before.LastSeen {
		t.Fatalf("replayed heartbeats moved last_seen from %s to %s", before.LastSeen, after.LastSeen)
	}

	// The node's own retry is no replay; its next heartbeat is accepted from anywhere, a
	// refused block included.
	if a := d.send(t, http.DefaultClient, "POST", "/api/v1/heartbeat", captured); a.Status != http.StatusOK || !jsonHas(a.Body, "last_seen", before.LastSeen) {
		t.Fatalf("the node's own retry: %s", a)
	}
	if a := d.send(t, from(addr(0)), "POST", "/api/v1/heartbeat", n.heartbeat(t, time.Now().Unix())); a.Status != http.StatusOK || jsonHas(a.Body, "last_seen", before.LastSeen) {
		t.Fatalf("the node's next heartbeat from a refused block: %s, want 200 with a new last_seen", a)
	}
}

// refusals is the daemon's count of requests refused by limit.
func refusals(t *testing.T, d *daemon, limit string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, body := testkit.Do(t, from("127.0.0.6"), req)
	prefix := `svrpd_rate_limit_refusals_total{limit="` + limit + `"} `
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no series %s", prefix)
	return 0
}
