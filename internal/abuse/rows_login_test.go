package abuse

import (
	"fmt"
	"testing"

	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

// badLogin sends row 5's garbage login of o's credential from c and returns its code.
func badLogin(t *testing.T, c *client.Client, o attack.Operator) proto.Code {
	t.Helper()
	return client.CodeOf(attack.GarbageLogin(t.Context(), c, o.Credential))
}

// TestRow5LoginFlood: garbage login signatures from one address stop at its failure budget;
// a stranger replaying an operator's credential from several addresses cannot lock that
// operator out; valid logins of a self-made identity from one address stop at the
// address's attempt budget, so it holds a bounded share of the used-challenge set; the bearer
// session cap answers 429 and is logged once; and honest operators log in throughout.
func TestRow5LoginFlood(t *testing.T) {
	const failures, perDID, attempts, bearers = 10, 5, 20, 40
	flags := []string{"--login-failure-address-limit", fmt.Sprint(failures), "--login-failure-operator-limit", fmt.Sprint(perDID),
		"--login-address-limit", fmt.Sprint(attempts)}
	d := start(t, append(flags, wholeCap("bearer-sessions", bearers)...)...)
	victim := newOperator(t)

	// Garbage from one address, naming a new identity each time: failures up to the budget,
	// then 429.
	codes := map[proto.Code]int{}
	for range failures + 10 {
		codes[badLogin(t, d.api(addr(0)), newOperator(t))]++
	}
	if codes[proto.BadSignature] != failures || codes[proto.RateLimited] != 10 {
		t.Fatalf("garbage logins from one address: %v; want %d BAD_SIGNATURE then RATE_LIMITED", codes, failures)
	}

	// The victim's (public) credential replayed with garbage from several addresses: past
	// its budget for that DID each address gets 429, and the victim from a clean address
	// logs in.
	codes = map[proto.Code]int{}
	for a := 1; a <= 4; a++ {
		for range 8 {
			codes[badLogin(t, d.api(addr(a)), victim)]++
		}
	}
	if codes[proto.BadSignature] != 4*perDID || codes[proto.RateLimited] != 32-4*perDID {
		t.Fatalf("replayed credential with garbage from 4 addresses: %v; want %d failures from each, then RATE_LIMITED", codes, perDID)
	}
	if _, err := victim.Login(t.Context(), d.api("127.0.0.2")); err != nil {
		t.Fatalf("the victim could not log in from a clean address: %v", err)
	}

	// Valid logins of a self-made identity from one address: the attempt budget bounds the
	// challenges it consumes.
	ok, limited := 0, 0
	for range attempts + 5 {
		_, err := newOperator(t).Login(t.Context(), d.api(addr(10)))
		switch client.CodeOf(err) {
		case "":
			ok++
		case proto.RateLimited:
			limited++
		default:
			t.Fatalf("login: %v", err)
		}
	}
	if ok != attempts || limited != 5 {
		t.Fatalf("valid logins from one address: %d ok, %d refused; want %d ok", ok, limited, attempts)
	}

	// The bearer session cap: that many live sessions, then 429 for everyone, logged once.
	live := 1 + attempts
	for a := 11; live < bearers; a++ {
		if _, err := newOperator(t).Login(t.Context(), d.api(addr(a))); err != nil {
			t.Fatalf("login %d under the cap: %v", live, err)
		}
		live++
	}
	for a := range 5 {
		if _, err := newOperator(t).Login(t.Context(), d.api(addr(100+a))); client.CodeOf(err) != proto.RateLimited {
			t.Fatalf("login beyond the bearer session cap: %v; want RATE_LIMITED", err)
		}
	}
	if warns := d.lines("global cap reached"); len(warns) != 1 {
		t.Fatalf("the bearer cap was logged %d times; want once: %q", len(warns), warns)
	}
}
