package client_test

import (
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// SignHeartbeat signs at the ts it is given what Heartbeat would send, so a heartbeat signed
// now and sent later is taken while its ts is fresh, and refused once it is not.
func TestSignHeartbeat(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	nc := w.client()
	node := w.node(nc, "node")
	if _, err := node.Register(ctx, "203.0.113.5:7000", []string{"inference"}, "eu"); err != nil {
		t.Fatal(err)
	}
	at := w.clock.Now().Add(10 * time.Second)
	req, err := node.SignHeartbeat(at.Unix())
	if err != nil {
		t.Fatal(err)
	}
	if req.PublicKey == nil || *req.PublicKey != node.PublicKey().Hex() || req.TS != at.Unix() {
		t.Fatalf("request %+v: want the node's key and the ts given", req)
	}
	w.clock.Advance(20 * time.Second)
	hb, err := nc.Heartbeat(ctx, req)
	if err != nil || hb.LastSeen != canonical.FormatTime(w.clock.Now()) {
		t.Fatalf("the signed heartbeat sent later: %+v, %v", hb, err)
	}
	stale, err := node.SignHeartbeat(w.clock.Now().Add(-time.Hour).Unix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Heartbeat(ctx, stale); client.CodeOf(err) != proto.StaleTS {
		t.Errorf("a heartbeat signed an hour ago: %v, want STALE_TS", err)
	}
}
