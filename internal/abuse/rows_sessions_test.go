package abuse

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// TestRow2InitiateFlood: fresh node keys initiating from one address stop at the address's
// budget, and from many addresses at the global cap of open sessions; refused sessions leave
// nothing behind, the data directory stays small, and honest logins and heartbeats during
// the flood succeed.
func TestRow2InitiateFlood(t *testing.T) {
	const perAddr, global = 40, 200
	d := start(t, append([]string{"--initiate-address-limit", fmt.Sprint(perAddr)}, wholeCap("binding-sessions", global)...)...)
	ctx := context.Background()

	good := newNode(t, d.api("127.0.0.2"))
	if _, err := good.Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
		t.Fatal(err)
	}
	op := newOperator(t)
	stopHonest := honest(t, "honest heartbeat+login rounds during the flood", 50*time.Millisecond, func() error {
		if _, err := good.Heartbeat(ctx); err != nil {
			return err
		}
		_, err := op.Login(t.Context(), d.api("127.0.0.3"))
		return err
	})

	// One address: its budget, then 429.
	one := d.api(addr(0))
	var refusedID string
	codes := map[proto.Code]int{}
	for i := range perAddr + 20 {
		id := fmt.Sprintf("bs-one-%03d", i)
		err := attack.Initiate(ctx, one, id)
		codes[client.CodeOf(err)]++
		if client.CodeOf(err) == proto.RateLimited {
			refusedID = id
		}
	}
	if codes[""] != perAddr || codes[proto.RateLimited] != 20 {
		t.Fatalf("one address, %d initiates: answers %v; want %d accepted, 20 RATE_LIMITED", perAddr+20, codes, perAddr)
	}
	// A refused initiate opened nothing: its id is unknown.
	if _, err := one.Status(ctx, refusedID); client.CodeOf(err) != proto.NotFound {
		t.Fatalf("status of a refused initiate: %v; want NOT_FOUND", err)
	}

	// Many addresses: the global cap of open sessions.
	accepted, limited := initiateFrom(t, d, 8, perAddr, func(c *client.Client) error {
		return attack.Initiate(ctx, c, "")
	})
	accepted += perAddr // the first address's sessions are still open
	stopHonest()
	if accepted != global || limited != 8*perAddr+perAddr-global {
		t.Fatalf("open sessions accepted %d, refused %d; want exactly the cap %d accepted", accepted, limited, global)
	}
	if warns := d.lines("global cap reached"); len(warns) != 1 {
		t.Fatalf("the reached cap was logged %d times; want once a minute: %q", len(warns), warns)
	}
	// Some 250 sessions of about 2 KiB: the store holds a few MiB whatever the flood.
	if n := d.diskBytes(); n > 64<<20 {
		t.Fatalf("data directory %d bytes after the flood", n)
	}
	t.Logf("accepted %d, refused %d; data directory %d KiB, RSS %d KiB", accepted, limited, d.diskBytes()>>10, d.rssKiB())
}

// TestRow3FinishedHistory: a key with a long history of finished sessions initiates as fast
// as a fresh one, because its history is never read; its open sessions are still capped at
// 16, and honest logins during 8 concurrent initiators succeed. The initiate budgets are
// raised so that the history can be made (the key's own budget has its test in registry).
func TestRow3FinishedHistory(t *testing.T) {
	d := start(t, "--initiate-address-limit", "100000", "--initiate-key-limit", "100000")
	ctx := context.Background()
	c := d.api(addr(0))
	n := newNode(t, c)
	const history = 300
	for i := range history {
		if err := attack.InitiateCancel(ctx, n, fmt.Sprintf("old-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	op := newOperator(t)
	stopHonest := honest(t, "honest logins", 25*time.Millisecond, func() error {
		_, err := op.Login(t.Context(), d.api("127.0.0.3"))
		return err
	})
	open, limited := initiateFrom(t, d, 8, 10, func(c *client.Client) error {
		me := &client.Node{Client: c, Key: n.Key, DID: n.DID}
		_, err := me.Initiate(ctx, client.InitiateOptions{})
		return err
	})
	stopHonest()
	if open != 16 || limited != 80-16 {
		t.Fatalf("a key with %d finished sessions: %d opened, %d refused; want 16 opened (its cap), the rest RATE_LIMITED", history, open, limited)
	}
	// A finished session's id is still refused.
	_, err := n.Initiate(ctx, client.InitiateOptions{SessionID: "old-000"})
	if client.CodeOf(err) != proto.SessionExists {
		t.Fatalf("reusing a finished session's id: %v; want SESSION_EXISTS", err)
	}
}

// initiateFrom runs attackers from addr(1) on, each on its own client making per calls of
// initiate at once with the others, and counts the calls accepted and those refused with
// RATE_LIMITED; any other answer fails the test.
func initiateFrom(t *testing.T, d *daemon, attackers, per int, initiate func(c *client.Client) error) (accepted, limited int) {
	var mu sync.Mutex
	testkit.Together(attackers, func(i int) {
		c := d.api(addr(1 + i))
		for range per {
			err := initiate(c)
			mu.Lock()
			switch code := client.CodeOf(err); {
			case err == nil:
				accepted++
			case code == proto.RateLimited:
				limited++
			default:
				t.Errorf("initiate: %v", err)
			}
			mu.Unlock()
		}
	})
	return accepted, limited
}
