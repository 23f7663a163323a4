package binding

import (
	"time"
)

// Bound reports whether the binding session s created is still its node's current binding:
// s is ACTIVE, has not been marked unbound, and current — the node key's active binding, if
// found — is the one s created. Status shows it as bound (docs/protocol.md §10.6).
func Bound(s BindingSession, current Binding, found bool) bool {
	return s.State == Active && s.UnboundBy == "" && found && current.SessionID == s.ID
}

// Unbind ends the binding that s created (docs/protocol.md §10.6): s must be ACTIVE and its binding
// the node's current one ([Bound]), else BAD_STATE. The result is s, still ACTIVE (terminal states
// never move), marked unbound by by at now; the caller removes the node key's binding in the
// same transaction. Checking who may unbind — the binding's operator or its node — is the
// caller's, and comes before this.
func Unbind(s BindingSession, current Binding, found bool, by UnboundBy, now time.Time) (BindingSession, error) {
	now = clock(now)
	if !Bound(s, current, found) {
		if s.State != Active {
			return s, ErrBadState.With("the session is %s, not ACTIVE; there is no binding to end", ExpireIfDue(s, now).State)
		}
		return s, ErrBadState.With("this session's binding has already ended")
	}
	return markUnbound(s, by, now), nil
}

// Supersede marks s, whose binding a newer activation of the same node key replaces, as
// unbound by supersession at now. A session already marked keeps its first mark.
func Supersede(s BindingSession, now time.Time) BindingSession {
	if s.UnboundBy != "" {
		return s
	}
	return markUnbound(s, UnboundBySuperseded, clock(now))
}

func markUnbound(s BindingSession, by UnboundBy, now time.Time) BindingSession {
	s.UnboundBy, s.UnboundAt, s.UpdatedAt = by, now, now
	return s
}
