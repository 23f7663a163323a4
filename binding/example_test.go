package binding_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
)

// A session walks the handshake one event at a time. Apply returns a new session and leaves
// its input alone, so on a refusal the caller still holds the state it had.
func ExampleApply() {
	created := time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC)
	s := binding.BindingSession{ID: "bs-0001", State: binding.Initiated, ExpiresAt: created.Add(10 * time.Minute)}
	now := created.Add(time.Minute)
	for _, ev := range []binding.Event{binding.Resolve, binding.Authorize, binding.Accept, binding.VerifyOK, binding.Cancel} {
		next, err := binding.Apply(s, ev, now)
		switch {
		case errors.Is(err, binding.ErrAlreadyActive):
			fmt.Printf("%-9s refused: already active\n", ev)
		case err != nil:
			fmt.Printf("%-9s refused: %v\n", ev, err)
		default:
			fmt.Printf("%-9s %s → %s\n", ev, s.State, next.State)
		}
		s = next
	}
	// Output:
	// resolve   INITIATED → PENDING_OPERATOR
	// authorize PENDING_OPERATOR → PENDING_NODE_ACCEPTANCE
	// accept    PENDING_NODE_ACCEPTANCE → VERIFYING
	// verify-ok VERIFYING → ACTIVE
	// cancel    refused: already active
}

// Expiry comes before the event: past its expires_at, a session is EXPIRED, and nothing else
// can happen to it.
func ExampleApply_expiry() {
	expires := time.Date(2025, 1, 15, 10, 40, 0, 0, time.UTC)
	s := binding.BindingSession{ID: "bs-0001", State: binding.PendingOperator, ExpiresAt: expires}

	next, err := binding.Apply(s, binding.Authorize, expires)
	fmt.Println(next.State, errors.Is(err, binding.ErrBadState))
	fmt.Println(binding.ExpireIfDue(s, expires.Add(-time.Second)).State)
	// Output:
	// EXPIRED true
	// PENDING_OPERATOR
}

// What an operator types is normalised before it is hashed: ASCII case and the spaces and
// dashes people group codes with, nothing else.
func ExampleNormalizeCode() {
	for _, typed := range []string{"qmd7-rjt8", "QMD7 RJT8", "abcdefgl"} {
		code := binding.NormalizeCode(typed)
		if !binding.ValidShortCode(code) {
			fmt.Printf("%-11q → %s, not a code: it matches no session\n", typed, code)
			continue
		}
		h := binding.HashSecret(code)
		fmt.Printf("%-11q → %s, stored as sha256 %s…\n", typed, code, hex.EncodeToString(h[:8]))
	}
	// Output:
	// "qmd7-rjt8" → QMD7RJT8, stored as sha256 b0c8d26f9ce072ff…
	// "QMD7 RJT8" → QMD7RJT8, stored as sha256 b0c8d26f9ce072ff…
	// "abcdefgl"  → ABCDEFGL, not a code: it matches no session
}

// The registry draws codes and tokens from crypto/rand.Reader; a seeded source makes this
// example repeatable.
func ExampleNewShortCode() {
	src := rand.NewChaCha8([32]byte{})
	code, _ := binding.NewShortCode(src)
	token, _ := binding.NewBindingToken(src)
	fmt.Println(len(code), binding.ValidShortCode(code))
	norm, isCode := binding.NormalizePresented(token)
	fmt.Println(norm == token, isCode)
	// Output:
	// 8 true
	// true false
}

// A null requested limit is no cap; a requested limit caps the grant, which must then name a
// value.
func ExampleCheckScope() {
	ten := 10.0
	requested := canonical.BindingSession{RequestedTaskTypes: []string{"inference"}, RequestedSingleLimit: &ten}
	for _, granted := range []canonical.Authorization{
		{TaskTypes: []string{"inference"}, SingleLimit: &ten, DailyLimit: &ten},
		{TaskTypes: []string{"inference"}},
		{TaskTypes: []string{"storage"}, SingleLimit: &ten},
	} {
		fmt.Println(binding.CheckScope(requested, granted))
	}
	// Output:
	// <nil>
	// single_limit exceeds the node's requested_single_limit
	// task type "storage" was not requested by the node
}
