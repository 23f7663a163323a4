package registry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// budgetService is a registry on a memory store under a fake clock, with cfg's bounds.
func budgetService(t *testing.T, cfg registry.Config) (*registry.Service, *testkit.Clock) {
	t.Helper()
	c := testkit.NewClock(epoch)
	cfg.Store, cfg.Clock = store.NewMemory(), c.Now
	svc, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc, c
}

// loginAt logs op in from addr with a fresh challenge and returns the error.
func loginAt(t *testing.T, svc *registry.Service, c *testkit.Clock, op operator, addr string) error {
	t.Helper()
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Login(context.Background(), op.loginRequest(t, ch.Challenge, c.Now()), addr)
	return err
}

// failLoginAt sends a login naming cred's operator whose signature is wrong, from addr.
func failLoginAt(t *testing.T, svc *registry.Service, c *testkit.Clock, op operator, addr string) error {
	t.Helper()
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	l := op.loginRequest(t, ch.Challenge, c.Now())
	l.Signature = tamperSig(t, l.Signature)
	_, err = svc.Login(context.Background(), l, addr)
	return err
}

// TestLoginFailuresNamingAVictimRefuseOnlyTheirSenders: strangers failing 60 logins that
// name a victim's DID from three addresses, and the victim failing once on a spent
// challenge, leave the victim's next correct login from its own address accepted; the
// strangers' addresses are the ones refused for that DID.
func TestLoginFailuresNamingAVictimRefuseOnlyTheirSenders(t *testing.T) {
	svc, c := budgetService(t, registry.Config{})
	victim := newOperator(t, "victim", c.Now(), "nodes.bind")
	strangers := []string{"198.51.100.1", "198.51.100.2", "203.0.113.7"}
	refused := 0
	for i := range 60 {
		err := failLoginAt(t, svc, c, victim, strangers[i%len(strangers)])
		if registry.LimitOf(err) == registry.LimitLoginFailuresPerOperator {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("60 failures naming one DID from 3 addresses were never refused")
	}
	// The victim spends a challenge once: a failure of its own.
	ch, err := svc.Challenge()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Login(context.Background(), victim.loginRequest(t, ch.Challenge, c.Now()), "192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Login(context.Background(), victim.loginRequest(t, ch.Challenge, c.Now()), "192.0.2.10"); proto.CodeOf(err) != proto.BadChallenge {
		t.Fatalf("spent challenge: %v", err)
	}
	if err := loginAt(t, svc, c, victim, "192.0.2.10"); err != nil {
		t.Fatalf("the victim's correct login from its own address: %v", err)
	}
	// The budget the strangers spent refuses them, even with the victim's own signature.
	if err := loginAt(t, svc, c, victim, strangers[0]); registry.LimitOf(err) != registry.LimitLoginFailuresPerOperator {
		t.Fatalf("a stranger that spent the DID's budget from its address: %v", err)
	}
}

// TestLoginFailureTablesFullOfStrangers: failures from more addresses than the tables track,
// each naming a made-up operator, leave an honest operator's login from an untracked
// address accepted, and the tables at their bound.
func TestLoginFailureTablesFullOfStrangers(t *testing.T) {
	const tracked = 64
	svc, c := budgetService(t, registry.Config{Limits: registry.Limits{MaxTrackedClients: tracked}})
	honest := newOperator(t, "honest", c.Now(), "nodes.bind")
	for a := range 4 * tracked {
		addr := fmt.Sprintf("10.%d.%d.1", a/256, a%256)
		for d := range 12 {
			stranger := newOperator(t, fmt.Sprintf("stranger-%d-%d", a, d%3), c.Now())
			if err := failLoginAt(t, svc, c, stranger, addr); err == nil {
				t.Fatal("a failed login was accepted")
			}
		}
	}
	if err := loginAt(t, svc, c, honest, "192.0.2.44"); err != nil {
		t.Fatalf("an honest login with the tables full of strangers: %v", err)
	}
	if err := failLoginAt(t, svc, c, honest, "192.0.2.45"); proto.CodeOf(err) == proto.RateLimited {
		t.Fatalf("an untracked address was charged with strangers' failures: %v", err)
	}
}

// TestAddressBlockBudgets: the addresses of one IPv4 /24, or the /64s of one IPv6 /48, share
// the block's budget of AddressBlockFactor addresses' worth; another block is untouched.
func TestAddressBlockBudgets(t *testing.T) {
	for _, c := range []struct {
		name     string
		addr     func(i int) string
		neighbor string
	}{
		{"IPv4 /24", func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }, "198.51.101.1"},
		{"IPv6 /48", func(i int) string { return fmt.Sprintf("2001:db8:5:%x::/64", i) }, "2001:db8:6::/64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc, _ := budgetService(t, registry.Config{Limits: registry.Limits{RegisterAddressLimit: 2, AddressBlockFactor: 4}})
			register := func(i int, addr string) error {
				n := newNode(t, fmt.Sprintf("%s-%d", c.name, i))
				_, err := svc.Register(context.Background(), n.registration(t, "203.0.113.1:7000"), addr)
				return err
			}
			// 4 addresses' worth of the block's budget: 8 keys, from 8 addresses.
			for i := range 8 {
				if err := register(i, c.addr(i)); err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
			}
			if err := register(8, c.addr(8)); registry.LimitOf(err) != registry.LimitRegisterPerBlock {
				t.Fatalf("a fresh address of a spent block: %v", err)
			}
			if err := register(9, c.neighbor); err != nil {
				t.Fatalf("an address of another block: %v", err)
			}
		})
	}
}
