package abuse

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/client"
)

// The rows of the capped tables' admission (docs/protocol.md §8.1): an attacker who makes
// addresses for free steers no choice of victim. A table full of entries in use refuses a
// newcomer with a Retry-After and displaces none; an attacker spread over many blocks of
// one network meets the network's quota. Which stale entry a newcomer takes is a matter of
// time, which a daemon on the real clock cannot move (a node is in use for ten minutes after
// it was last seen, and no flag shortens that): the rows that need stale entries — bind only
// the top block, a newcomer taking a spread-thin attacker's stale record — are the registry's
// tests with a clock of their own (TestNodeBindOnlyTheTopBlock and TestNodeSpreadThin in
// registry/nodetable_test.go).

const (
	// spreadHonest is how many entries the honest block holds, and spreadThin how many
	// blocks the attacker holds one entry in: together the lowered table's cap.
	spreadHonest, spreadThin = 12, 48
	// spreadNewcomers is how many newcomers from fresh blocks try to get in after.
	spreadNewcomers = 2000
)

// newcomers has n newcomers, each from a fresh block (attack.Thin from the attacker's first
// spreadThin on), try fn once, and fails the test unless every one was refused with a 429
// and a Retry-After of at most most.
func newcomers(t *testing.T, d *daemon, n int, most time.Duration, fn func(c *client.Client) error) {
	t.Helper()
	err := attack.Spread(t.Context(), n, func(i int) error {
		err := fn(d.api(attack.Thin(10, spreadThin+i-1)))
		if ra := retryAfter(err); client.CodeOf(err) != proto.RateLimited || ra <= 0 || ra > most {
			return fmt.Errorf("newcomer %d: %v (Retry-After %v); want RATE_LIMITED with a Retry-After of at most %v", i, err, ra, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRow11SpreadThinNodes: an honest /24 holds 12 heartbeating nodes and the attacker one
// node in each of 48 /24s spread over 16 networks, which fills the lowered node table;
// newcomers from fresh /24s keep registering. The honest block is the block holding the
// most, and that makes it no victim: every honest heartbeat and re-registration is accepted
// throughout, and every newcomer is refused with a Retry-After, since no record is stale.
func TestRow11SpreadThinNodes(t *testing.T) {
	d := start(t, "--max-nodes", fmt.Sprint(spreadHonest+spreadThin))
	ctx := t.Context()
	var nodes []*client.Node
	for i := range spreadHonest {
		n := newNode(t, d.api(fmt.Sprintf("127.0.0.%d", 10+i)))
		if _, err := n.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
			t.Fatalf("honest node %d: %v", i, err)
		}
		nodes = append(nodes, n)
	}
	err := attack.Spread(ctx, spreadThin, func(i int) error { return attack.RegisterFresh(ctx, d.api(attack.Thin(10, i-1))) })
	if err != nil {
		t.Fatalf("the attacker's nodes: %v", err)
	}

	round := 0
	stopHonest := honest(t, "honest heartbeats and re-registrations during the attack", 50*time.Millisecond, func() error {
		round++
		for i, n := range nodes {
			if _, err := n.Heartbeat(ctx); err != nil {
				return fmt.Errorf("heartbeat of honest node %d: %w", i, err)
			}
		}
		n := nodes[round%len(nodes)]
		if _, err := n.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
			return fmt.Errorf("re-registration of an honest node: %w", err)
		}
		return nil
	})
	newcomers(t, d, spreadNewcomers, registry.DefaultOnlineWindow, func(c *client.Client) error { return attack.RegisterFresh(ctx, c) })
	ran := stopHonest()
	for i, n := range nodes {
		if _, err := n.Heartbeat(ctx); err != nil {
			t.Fatalf("honest node %d after the attack: %v", i, err)
		}
	}
	if held := d.tg.Nodes(ctx); held != spreadHonest+spreadThin {
		t.Fatalf("the registry holds %d nodes; want the %d it held", held, spreadHonest+spreadThin)
	}
	t.Logf("%d newcomers from fresh blocks refused with a Retry-After; %d honest rounds of %d heartbeats and a re-registration, all accepted", spreadNewcomers, ran, spreadHonest)
}

// TestRow11SpreadThinBearerSessions: an office /24 holds 12 operators' sessions, each presented
// while the attack runs, and the attacker one session in each of 48 /24s spread over 16 networks,
// which fills the lowered bearer-session table; logins of made-up operators from fresh /24s
// follow. Every office session stays alive, every office re-login is accepted (ending, at most, a
// session of its own operator), and every newcomer is refused with a Retry-After.
func TestRow11SpreadThinBearerSessions(t *testing.T) {
	d := start(t, "--max-bearer-sessions", fmt.Sprint(spreadHonest+spreadThin))
	ctx := t.Context()
	type officer struct {
		id attack.Operator
		c  *client.Client
		s  *client.Operator
	}
	var office []*officer
	for i := range spreadHonest {
		o := &officer{id: newOperator(t), c: d.api(fmt.Sprintf("127.0.0.%d", 10+i))}
		var err error
		if o.s, err = o.id.Login(ctx, o.c); err != nil {
			t.Fatalf("office login %d: %v", i, err)
		}
		office = append(office, o)
	}
	err := attack.Spread(ctx, spreadThin, func(i int) error { return attack.LoginFresh(ctx, d.api(attack.Thin(10, i-1))) })
	if err != nil {
		t.Fatalf("the attacker's sessions: %v", err)
	}

	round := 0
	stopHonest := honest(t, "office sessions presented and re-logins during the attack", 50*time.Millisecond, func() error {
		round++
		for i, o := range office {
			if err := present(ctx, o.s); err != nil {
				return fmt.Errorf("office operator %d: %w", i, err)
			}
		}
		o := office[round%len(office)]
		s, err := o.id.Login(ctx, o.c)
		if err != nil {
			return fmt.Errorf("an office re-login: %w", err)
		}
		o.s = s
		return nil
	})
	newcomers(t, d, spreadNewcomers, 15*time.Minute, func(c *client.Client) error { return attack.LoginFresh(ctx, c) })
	ran := stopHonest()
	for i, o := range office {
		if err := present(ctx, o.s); err != nil {
			t.Fatalf("office operator %d after the attack: %v", i, err)
		}
	}
	t.Logf("%d newcomers from fresh blocks refused with a Retry-After; %d honest rounds of %d sessions presented and a re-login, all accepted", spreadNewcomers, ran, spreadHonest)
}

// present presents o's bearer session: cancelling a binding session that does not exist is
// NOT_FOUND with a live session, NO_SESSION without one.
func present(ctx context.Context, o *client.Operator) error {
	if _, err := o.Cancel(ctx, "no-such-session"); client.CodeOf(err) != proto.NotFound {
		return fmt.Errorf("presenting the session: %v; want NOT_FOUND", err)
	}
	return nil
}

// evenShareCap is the lowered cap of both session tables in the even-share rows, and
// evenShareBlocks how many blocks of one network the attacker holds an entry in: as many.
const evenShareCap, evenShareBlocks = 64, 64

// evenShare: the attacker initiates a binding session and logs a made-up operator in from
// each of evenShareBlocks blocks of one network (attacker(i), the i-th block's client), with
// both tables' caps at evenShareCap; then 10 honest initiates and 10 honest logins from
// another network (honestAt(i)) are all accepted. The blocks together meet their network's
// quota long before the caps: every attacker request past it is refused with a Retry-After.
func evenShare(t *testing.T, d *daemon, attacker, honestAt func(i int) *client.Client) {
	t.Helper()
	ctx := t.Context()
	for _, table := range []struct {
		name string
		try  func(c *client.Client) error
	}{
		{"binding initiates", func(c *client.Client) error { return attack.Initiate(ctx, c, "") }},
		{"logins", func(c *client.Client) error { return attack.LoginFresh(ctx, c) }},
	} {
		codes := map[proto.Code]int{}
		for i := range evenShareBlocks {
			codes[codeOf(table.try)(attacker(i))]++
		}
		if len(codes) != 2 || codes[""] == 0 || codes[""] >= evenShareCap-10 || codes[proto.RateLimited] == 0 {
			t.Fatalf("%s from %d blocks of one network: %v; want some accepted, the rest RATE_LIMITED with a Retry-After, and room left of the cap %d for 10 more", table.name, evenShareBlocks, codes, evenShareCap)
		}
		for i := range 10 {
			if err := table.try(honestAt(i)); err != nil {
				t.Fatalf("honest %s %d of 10 from another network: %v", table.name, i+1, err)
			}
		}
		t.Logf("%s: the attacker's %d blocks %v; 10/10 honest accepted", table.name, evenShareBlocks, codes)
	}
}

// evenShareFlags lower both session tables' caps, leaving every quota at its default share.
func evenShareFlags() []string {
	return []string{"--max-binding-sessions", fmt.Sprint(evenShareCap), "--max-bearer-sessions", fmt.Sprint(evenShareCap)}
}

// TestRow12EvenShareIPv4: one entry in each of 64 /24s of one /16 (127.1.x.1) against
// tables of 64; honest clients of 127.0.0.0/16 initiate and log in, 10/10 each.
func TestRow12EvenShareIPv4(t *testing.T) {
	d := start(t, evenShareFlags()...)
	evenShare(t, d,
		func(i int) *client.Client { return d.api(addr(i * 250)) },
		func(i int) *client.Client { return d.api(fmt.Sprintf("127.0.0.%d", 10+i)) })
}

// TestRow13EvenShareIPv6: one entry in each of 64 /48s of one /32 (2001:db8::/32) against
// tables of 64; honest clients of another /32 (3fff::/32) initiate and log in, 10/10 each. It
// runs in an IPv6 network namespace of its own, whose loopback holds every address the row
// sends from, with the daemon and the clients inside it: the test runs itself again there
// (inNetns). Making one needs root; without, it is skipped, and the row's forwarded twin
// below runs the same attack.
func TestRow13EvenShareIPv6(t *testing.T) {
	attacker := func(i int) string { return fmt.Sprintf("2001:db8:%x::1", i) }
	honestAt := func(i int) string { return fmt.Sprintf("3fff:0:%x::1", i) }
	const listen = "fd00::1"
	if os.Getenv(netnsEnv) == "" {
		var addrs []string
		for i := range evenShareBlocks {
			addrs = append(addrs, attacker(i))
		}
		for i := range 10 {
			addrs = append(addrs, honestAt(i))
		}
		inNetns(t, append(addrs, listen))
		return
	}
	d := start(t, append(evenShareFlags(), "--listen", "["+listen+"]:0")...)
	evenShare(t, d,
		func(i int) *client.Client { return d.api(attacker(i)) },
		func(i int) *client.Client { return d.api(honestAt(i)) })
}

// netnsEnv, set, says the test runs inside the network namespace inNetns made for it.
const netnsEnv = "SVRP_ABUSE_IN_NETNS"

// inNetns makes a network namespace whose loopback is up and holds addrs, runs the calling
// test again inside it (the test binary, told so by netnsEnv) and fails when that run fails;
// the namespace is deleted at the test's end. It skips the test without root or ip(8).
func inNetns(t *testing.T, addrs []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("this row runs in an IPv6 network namespace of its own, which only root can make")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("this row makes its network namespace with ip(8), which is not installed")
	}
	name := fmt.Sprintf("svrp-abuse-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	batch := []string{"link set lo up"}
	for _, a := range addrs {
		// nodad: an address of a namespace of its own has no one to collide with, and is
		// usable at once.
		batch = append(batch, "addr add "+a+"/128 dev lo nodad")
	}
	cmd := exec.Command("ip", "-n", name, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(batch, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	cmd = exec.Command("ip", "netns", "exec", name, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the run inside the network namespace: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "honest accepted") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// TestRow13EvenShareIPv6Forwarded: row 13 with its IPv6 clients forwarded by a trusted proxy
// on loopback (X-Forwarded-For), which gives the registry the very client addresses a
// network of their own would, with no privilege.
func TestRow13EvenShareIPv6Forwarded(t *testing.T) {
	const proxy = "127.0.0.2"
	d := start(t, append(evenShareFlags(), "--trusted-proxy", proxy+"/32")...)
	evenShare(t, d,
		func(i int) *client.Client { return d.tg.Forwarded(proxy, fmt.Sprintf("2001:db8:%x::1", i)) },
		func(i int) *client.Client { return d.tg.Forwarded(proxy, fmt.Sprintf("3fff:0:%x::1", i)) })
}
