package abuse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/client"
)

// TestFairRow8NodeTableFull: fresh node keys from 1,500 addresses in six address blocks fill
// the node table (lowered with --max-nodes) and keep registering; an honest new node from a
// block of its own registers throughout and after, because a full table makes room by
// displacing a node of the block holding the most, and a node registered before the attack
// keeps its record and its heartbeats. One block alone, first, stops at its quota
// (--max-nodes-per-block). Memory and disk stay bounded.
func TestFairRow8NodeTableFull(t *testing.T) {
	const capNodes, perBlock, addrs = 400, 150, 1500
	d := start(t, "--max-nodes", fmt.Sprint(capNodes), "--max-nodes-per-block", fmt.Sprint(perBlock))
	ctx := context.Background()
	home := d.api("127.0.0.2")
	old := newNode(t, home)
	if _, err := old.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
		t.Fatal(err)
	}
	rssBefore := d.rssKiB()

	stopHonest := honest(t, "honest registrations and heartbeats during the attack", 100*time.Millisecond, func() error {
		n, err := attack.FreshNode(d.api("127.0.0.3"))
		if err != nil {
			return err
		}
		if _, err := n.Register(ctx, "203.0.113.10:7000", nil, ""); err != nil {
			return err
		}
		_, err = old.Heartbeat(ctx)
		return err
	})
	fresh := func(c *client.Client) error {
		n, err := attack.FreshNode(c)
		if err != nil {
			return err
		}
		if _, err := n.Register(ctx, "198.51.100.1:7000", []string{"inference"}, ""); err != nil {
			return err
		}
		_, err = n.Heartbeat(ctx)
		return err
	}
	codes := fairFlood(t, d, perBlock, capNodes, addrs, fresh)
	ran := stopHonest()
	after := newNode(t, d.api("127.0.0.4"))
	if _, err := after.Register(ctx, "203.0.113.11:7000", nil, ""); err != nil {
		t.Fatalf("honest registration after the attack: %v", err)
	}
	if _, err := old.Heartbeat(ctx); err != nil {
		t.Fatalf("the heartbeat of a node registered before the attack: %v", err)
	}
	if held := d.tg.Nodes(ctx); held > capNodes {
		t.Fatalf("the registry holds %d nodes; the cap is %d", held, capNodes)
	}
	t.Logf("%d addresses in %d blocks registering: %v; %d honest rounds during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}
