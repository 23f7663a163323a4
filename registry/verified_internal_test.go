package registry

import (
	"errors"
	"testing"

	"github.com/svrp/svrp/binding"
)

// The write transaction reuses the dry run's answer for the same session, and verifies
// again when the session changed in between.
func TestVerifiedReusesAnswers(t *testing.T) {
	var v verified
	runs := 0
	bad := errors.New("bad signature")
	f := func() error { runs++; return bad }
	sess := binding.BindingSession{ID: "a", State: binding.PendingNodeAcceptance}
	for range 3 {
		if err := v.check(sess, f); err != bad {
			t.Fatalf("check = %v, want the remembered answer", err)
		}
	}
	if runs != 1 {
		t.Errorf("f ran %d times for one session, want 1", runs)
	}
	sess.State = binding.Active
	v.check(sess, f)
	if runs != 2 {
		t.Errorf("f ran %d times after the session changed, want 2", runs)
	}
}
