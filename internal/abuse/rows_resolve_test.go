package abuse

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/registry/client"
)

// wrongCode is the i-th short code that no session has.
func wrongCode(i int) string { return attack.WrongCode(i) }

// resolveAs sends row 6's resolve of code from ip with token as the bearer and returns the
// answer's code.
func resolveAs(d *daemon, ip, token, code string, header http.Header) string {
	a := d.target().Resolve(context.Background(), from(ip), token, code, header)
	if a.Status == 0 {
		d.t.Fatalf("resolve: %s", a.Code)
	}
	return a.Code
}

// TestRow6ResolveBudgets: one bearer guessing from many addresses stops at the per-operator
// budget; all guessers together stop at the global budget; an honest operator resolves a real
// code while one guesser is blocked, and a resolve refused by a budget changes nothing.
func TestRow6ResolveBudgets(t *testing.T) {
	const perOp, global = 20, 50
	d := start(t, "--resolve-address-limit", "100000", "--resolve-operator-limit", fmt.Sprint(perOp), "--resolve-global-limit", fmt.Sprint(global))
	ctx := context.Background()
	login := func(ip string) *client.Operator {
		o, err := newOperator(t).Login(t.Context(), d.api(ip))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	mallory := login("127.0.0.5")
	codes := map[string]int{}
	for i := range 40 {
		codes[resolveAs(d, addr(i), mallory.Token, wrongCode(i), nil)]++
	}
	if codes["NOT_FOUND"] != perOp || codes["RATE_LIMITED"] != 40-perOp {
		t.Fatalf("one bearer guessing from 40 addresses: %v; want %d NOT_FOUND then RATE_LIMITED", codes, perOp)
	}

	// An honest operator resolves a real code meanwhile.
	node := newNode(t, d.api("127.0.0.2"))
	first, err := node.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	honestOp := login("127.0.0.3")
	if _, err := honestOp.Resolve(ctx, first.ShortCode); err != nil {
		t.Fatalf("honest resolve while a guesser is blocked: %v", err)
	}

	// More guessers, each a new operator: the global budget.
	second, err := node.Initiate(ctx, client.InitiateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	codes = map[string]int{}
	for g := range 3 {
		o := login(addr(200 + g))
		for i := range perOp {
			codes[resolveAs(d, addr(100+g*perOp+i), o.Token, wrongCode(1000+g*perOp+i), nil)]++
		}
	}
	if codes["NOT_FOUND"] != global-perOp || codes["RATE_LIMITED"] != 3*perOp-(global-perOp) {
		t.Fatalf("three more guessers: %v; want the global budget of %d failures in all", codes, global)
	}
	// Past the global budget even a real code is refused, and the refusal changes nothing.
	if c := resolveAs(d, "127.0.0.3", honestOp.Token, second.ShortCode, nil); c != "RATE_LIMITED" {
		t.Fatalf("resolve past the global budget: %s; want RATE_LIMITED", c)
	}
	if st, err := honestOp.Status(ctx, second.BindingSessionID); err != nil || st.State != "INITIATED" {
		t.Fatalf("session after a refused resolve: %+v, %v; want INITIATED", st, err)
	}
}

// TestRow6TrustedProxy: behind a trusted proxy each forwarded client has its own budget, IPv6
// clients count by /64, and an untrusted peer cannot escape its budget with forwarding
// headers.
func TestRow6TrustedProxy(t *testing.T) {
	const perAddr = 5
	d := start(t, "--trusted-proxy", "127.0.0.2/32", "--resolve-address-limit", fmt.Sprint(perAddr), "--resolve-operator-limit", "100000")
	o, err := newOperator(t).Login(t.Context(), d.api("127.0.0.9"))
	if err != nil {
		t.Fatal(err)
	}
	guess := 0
	try := func(peer string, h http.Header) string {
		guess++
		return resolveAs(d, peer, o.Token, wrongCode(guess), h)
	}
	xff := func(a string) http.Header { return http.Header{"X-Forwarded-For": {"203.0.113.50, " + a}} }
	spend := func(peer string, h http.Header) {
		t.Helper()
		for range perAddr {
			if c := try(peer, h); c != "NOT_FOUND" {
				t.Fatalf("guess within the budget of %v: %s", h, c)
			}
		}
		if c := try(peer, h); c != "RATE_LIMITED" {
			t.Fatalf("guess beyond the budget of %v: %s; want RATE_LIMITED", h, c)
		}
	}

	// Through the proxy: one forwarded client spends its budget, another still has its own.
	spend("127.0.0.2", xff("198.51.100.7"))
	if c := try("127.0.0.2", xff("198.51.100.8")); c != "NOT_FOUND" {
		t.Fatalf("another client behind the proxy: %s; want its own budget", c)
	}
	// IPv6: one /64 is one client; another /64 is another. Forwarded works like X-Forwarded-For.
	spend("127.0.0.2", xff("2001:db8::1"))
	if c := try("127.0.0.2", xff("2001:db8::2")); c != "RATE_LIMITED" {
		t.Fatalf("same /64: %s; want RATE_LIMITED", c)
	}
	if c := try("127.0.0.2", http.Header{"Forwarded": {`for="[2001:db8:0:1::1]:4711"`}}); c != "NOT_FOUND" {
		t.Fatalf("another /64: %s; want its own budget", c)
	}
	// An untrusted peer's forwarding headers are ignored: it is one client whatever it says.
	for i := range perAddr {
		if c := try("127.0.0.3", xff(fmt.Sprintf("198.51.100.%d", 100+i))); c != "NOT_FOUND" {
			t.Fatalf("untrusted peer within its budget: %s", c)
		}
	}
	if c := try("127.0.0.3", xff("198.51.100.200")); c != "RATE_LIMITED" {
		t.Fatalf("untrusted peer claiming a new address: %s; want RATE_LIMITED", c)
	}
}
