package abuse

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/api"
)

// replayers is how many source addresses send each replay.
const replayers = 200

// replayFromEverywhere sends body to path once from each of replayers addresses and returns
// the answers, while the honest node heartbeats; every honest heartbeat must succeed.
func replayFromEverywhere(t *testing.T, d *daemon, h *steady, path string, body any) []attack.Answer {
	t.Helper()
	answers := make([]attack.Answer, replayers)
	var honestFailed atomic.Int32
	stop := make(chan struct{})
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := h.node.Heartbeat(t.Context()); err != nil {
				t.Errorf("an honest heartbeat during the replays: %v", err)
				honestFailed.Add(1)
			}
		}
	}()
	parallel(replayers, 16, func(i int) {
		answers[i] = d.send(t, from(addr(i)), "POST", path, body)
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
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", copied) {
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
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", atA) {
		if a.Status != http.StatusUnauthorized || a.Code != "STALE_TS" {
			t.Fatalf("old registration replayed from %s: %s, want 401 STALE_TS", addr(i), a)
		}
	}
	asV1 := mover.registration(t, "203.0.113.10:7000")
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", asV1) {
		if a.Status != http.StatusUnauthorized || a.Code != "BAD_SIGNATURE" {
			t.Fatalf("v1 registration after v2 from %s: %s, want 401 BAD_SIGNATURE", addr(i), a)
		}
	}
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/register", atB) {
		if a.Status != http.StatusOK {
			t.Fatalf("the last registration replayed from %s: %s, want 200 with the stored record", addr(i), a)
		}
	}
	if after := d.node(t, mover.key); after.Endpoint != moved.Endpoint || after.LastSeen != moved.LastSeen || *after.RegistrationTS != now-5 {
		t.Fatalf("after the replays the record is %+v, was %+v", after, moved)
	}
}

// Row 8: a captured heartbeat replayed by a third party within the ±300 s window changes
// nothing; an older one is refused.
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
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/heartbeat", captured) {
		if a.Status != http.StatusOK || !jsonHas(a.Body, "last_seen", before.LastSeen) {
			t.Fatalf("replay from %s: %s, want 200 with last_seen %s", addr(i), a, before.LastSeen)
		}
	}
	older := n.heartbeat(t, captured.TS-1)
	for i, a := range replayFromEverywhere(t, d, h, "/api/v1/heartbeat", older) {
		if a.Status != http.StatusUnauthorized || a.Code != "STALE_TS" {
			t.Fatalf("older heartbeat from %s: %s, want 401 STALE_TS", addr(i), a)
		}
	}
	if after := d.node(t, n.key); after.LastSeen != before.LastSeen {
		t.Fatalf("replayed heartbeats moved last_seen from %s to %s", before.LastSeen, after.LastSeen)
	}
}
