package abuse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/client"
)

// TestFairRow8NodeTableFull: fresh node keys from 1,500 addresses in six address blocks of
// one network keep registering against a lowered node table; one block alone stops at its
// quota, and the six together at the network's, never at the table's cap. Honest new nodes
// from another network register throughout and after, and a node registered before the
// attack, heartbeating, keeps its record. Memory and disk stay bounded.
func TestFairRow8NodeTableFull(t *testing.T) {
	const capNodes, addrs = 1000, 1500
	q := fairQuotas{perBlock: 150, perNetwork: 300}
	d := start(t, append([]string{"--max-nodes", fmt.Sprint(capNodes)}, q.flags("nodes")...)...)
	ctx := context.Background()
	home := d.honest("127.0.0.2")
	old := newNode(t, home)
	if _, err := old.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
		t.Fatal(err)
	}
	rssBefore := d.rssKiB()

	// Each honest new node registers from an address of its own, 100 to a block of the
	// honest network, as nodes of many hosts would: none of its groups nears its quota.
	round := 0
	stopHonest := honest(t, "honest registrations and heartbeats during the attack", 100*time.Millisecond, func() error {
		round++
		n, err := attack.FreshNode(d.api(fmt.Sprintf("127.0.%d.%d", 1+round/100, 1+round%100)))
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
	codes := fairFlood(t, d, q, addrs, fresh)
	ran := stopHonest()
	after := newNode(t, d.honest("127.0.0.4"))
	if _, err := after.Register(ctx, "203.0.113.11:7000", nil, ""); err != nil {
		t.Fatalf("honest registration after the attack: %v", err)
	}
	if _, err := old.Heartbeat(ctx); err != nil {
		t.Fatalf("the heartbeat of a node registered before the attack: %v", err)
	}
	if held, want := d.tg.Nodes(ctx), q.perNetwork+ran+2; held != want {
		t.Fatalf("the registry holds %d nodes; want the attacker's network quota %d and the %d honest ones", held, q.perNetwork, ran+2)
	}
	t.Logf("%d addresses in %d blocks of one network registering: %v; %d honest rounds during it, all accepted", addrs, (addrs+249)/250, codes, ran)
	d.bounded(rssBefore)
}
