package binding

import (
	"time"
)

// Event is something that happens to a binding session: a request of one of the binding
// endpoints, the outcome of the chain verification inside an accept, or time passing.
type Event uint8

// Events. Do not reorder: the values index the transition table.
const (
	EventInvalid   Event = iota
	Resolve              // an operator presented the session's code or token
	Authorize            // the operator's credential chain and authorization verified
	Accept               // the node's acceptance matched the session; re-verification starts
	VerifyOK             // all four signatures verified together
	VerifyFail           // the re-verification failed; the session is given back to the node
	NodeReject           // the node refused the authorization
	OperatorReject       // the resolving operator refused the session
	Cancel               // the node or the resolving operator cancelled
	Expire               // expires_at passed
	numEvents
)

var eventNames = [...]string{
	Resolve:        "resolve",
	Authorize:      "authorize",
	Accept:         "accept",
	VerifyOK:       "verify-ok",
	VerifyFail:     "verify-fail",
	NodeReject:     "node-reject",
	OperatorReject: "operator-reject",
	Cancel:         "cancel",
	Expire:         "expire",
}

func (e Event) String() string { return enumName(eventNames[:], e, "Event") }

const numStates = int(Cancelled) + 1

// table is the state machine (description 3.1, docs/protocol.md §6): table[from][event] is the
// state the event leads to, and the zero State means the event does not fit. Nothing else decides a
// transition; Apply only adds expiry and the error codes.
var table = [numStates][numEvents]State{
	Initiated: {
		Resolve: PendingOperator,
		Cancel:  Cancelled,
		Expire:  Expired,
	},
	PendingOperator: {
		Authorize:      PendingNodeAcceptance,
		OperatorReject: RejectedByOperator,
		Cancel:         Cancelled,
		Expire:         Expired,
	},
	PendingNodeAcceptance: {
		Accept:     Verifying,
		NodeReject: RejectedByNode,
		Cancel:     Cancelled,
		Expire:     Expired,
	},
	Verifying: {
		VerifyOK:   Active,
		VerifyFail: PendingNodeAcceptance,
		Cancel:     Cancelled,
		Expire:     Expired,
	},
}

// activeAnswers lists the events that, on an ACTIVE session, are the binding's success
// arriving a second time (or a request to undo it), answered ALREADY_ACTIVE rather than
// BAD_STATE (description 3.1, docs/protocol.md §5.4): a client that lost the first answer can tell
// it succeeded.
var activeAnswers = [numEvents]bool{
	Accept:         true,
	VerifyOK:       true,
	NodeReject:     true,
	OperatorReject: true,
	Cancel:         true,
}

// Transition is one row of the state machine.
type Transition struct {
	From State
	On   Event
	To   State
}

// Transitions returns every row of the state machine, ordered by state then event. Any pair
// not listed is refused: with ALREADY_ACTIVE for the events of a second activation (or its
// undoing) on an ACTIVE session, with BAD_STATE otherwise.
func Transitions() []Transition {
	var rows []Transition
	for from := range table {
		for ev, to := range table[from] {
			if to != StateInvalid {
				rows = append(rows, Transition{From: State(from), On: Event(ev), To: to})
			}
		}
	}
	return rows
}

// Apply returns the session that ev leads to at now, or an error with the protocol code of
// the refusal. It never changes s: the result is a copy, which shares the input's credentials
// and acceptance and leaves them as they are.
//
// Expiry comes first: a session that is not terminal and whose expires_at is not after now is
// EXPIRED before ev is judged, so no event can act on a session past its expires_at, and an
// Expire event on it succeeds. On a terminal session nothing moves: the events that would
// activate it again or undo it get ALREADY_ACTIVE on an ACTIVE session, every other refusal is
// BAD_STATE.
//
// On success the result has UpdatedAt = now, and ActivatedAt = now when it became ACTIVE. On
// error the result is [ExpireIfDue](s, now): the input, expired if it was due, which is what the
// registry should hold either way.
func Apply(s BindingSession, ev Event, now time.Time) (BindingSession, error) {
	now = clock(now)
	s, expired := expireIfDue(s, now)
	if expired && ev == Expire {
		return s, nil
	}
	to := next(s.State, ev)
	if to == StateInvalid {
		return s, refusal(s.State, ev)
	}
	s.State = to
	s.UpdatedAt = now
	if to == Active {
		s.ActivatedAt = now
	}
	return s, nil
}

func next(from State, ev Event) State {
	if int(from) >= numStates || ev >= numEvents {
		return StateInvalid
	}
	return table[from][ev]
}

func refusal(st State, ev Event) error {
	if st == Active && ev < numEvents && activeAnswers[ev] {
		return ErrAlreadyActive.With("the binding is already active (%s)", ev)
	}
	return ErrBadState.With("%s does not fit a session in state %s", ev, st)
}

// ExpireIfDue returns s moved to EXPIRED when it is not terminal and its expires_at is not
// after now; otherwise s unchanged. The registry applies it on every read and write of a
// session and in its periodic sweep.
func ExpireIfDue(s BindingSession, now time.Time) BindingSession {
	s, _ = expireIfDue(s, clock(now))
	return s
}

func expireIfDue(s BindingSession, now time.Time) (BindingSession, bool) {
	if next(s.State, Expire) == StateInvalid || now.Before(s.ExpiresAt) {
		return s, false
	}
	s.State = Expired
	s.UpdatedAt = now
	return s, true
}

// RepairAtStart returns the state a stored session must be read in when the registry starts.
// VERIFYING is held only inside one accept; a session found in it was being verified when the
// process stopped, and goes back to PENDING_NODE_ACCEPTANCE (docs/protocol.md §6), or to EXPIRED if
// its time ran out meanwhile. Other sessions are returned as they are, expired if due.
func RepairAtStart(s BindingSession, now time.Time) BindingSession {
	s = ExpireIfDue(s, now)
	if s.State == Verifying {
		s, _ = Apply(s, VerifyFail, now)
	}
	return s
}

// clock is the registry's time as the protocol compares it: UTC, truncated to whole seconds
// (docs/protocol.md §1), and without a monotonic reading, so that stored times compare as they
// read.
func clock(now time.Time) time.Time { return now.UTC().Truncate(time.Second) }
