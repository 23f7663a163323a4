package binding_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/proto"
)

// The state machine as description 3.1 and docs/protocol.md §6 write it, listed by hand so that the
// table in state.go is checked against the text rather than against itself.
var wantTransitions = []binding.Transition{
	{From: binding.Initiated, On: binding.Resolve, To: binding.PendingOperator},
	{From: binding.Initiated, On: binding.Cancel, To: binding.Cancelled},
	{From: binding.Initiated, On: binding.Expire, To: binding.Expired},
	{From: binding.PendingOperator, On: binding.Authorize, To: binding.PendingNodeAcceptance},
	{From: binding.PendingOperator, On: binding.OperatorReject, To: binding.RejectedByOperator},
	{From: binding.PendingOperator, On: binding.Cancel, To: binding.Cancelled},
	{From: binding.PendingOperator, On: binding.Expire, To: binding.Expired},
	{From: binding.PendingNodeAcceptance, On: binding.Accept, To: binding.Verifying},
	{From: binding.PendingNodeAcceptance, On: binding.NodeReject, To: binding.RejectedByNode},
	{From: binding.PendingNodeAcceptance, On: binding.Cancel, To: binding.Cancelled},
	{From: binding.PendingNodeAcceptance, On: binding.Expire, To: binding.Expired},
	{From: binding.Verifying, On: binding.VerifyOK, To: binding.Active},
	{From: binding.Verifying, On: binding.VerifyFail, To: binding.PendingNodeAcceptance},
	{From: binding.Verifying, On: binding.Cancel, To: binding.Cancelled},
	{From: binding.Verifying, On: binding.Expire, To: binding.Expired},
}

// On ACTIVE, these events are the binding's success arriving again (or an attempt to undo
// it) and answer ALREADY_ACTIVE; every other refusal is BAD_STATE.
var alreadyActiveEvents = map[binding.Event]bool{
	binding.Accept: true, binding.VerifyOK: true, binding.Cancel: true,
	binding.OperatorReject: true, binding.NodeReject: true,
}

// States and events to walk, including values outside the enums.
var (
	allStates = []binding.State{
		binding.StateInvalid, binding.Initiated, binding.PendingOperator, binding.PendingNodeAcceptance,
		binding.Verifying, binding.Active, binding.Expired, binding.RejectedByOperator,
		binding.RejectedByNode, binding.Cancelled, 10, 255,
	}
	allEvents = []binding.Event{
		binding.EventInvalid, binding.Resolve, binding.Authorize, binding.Accept, binding.VerifyOK,
		binding.VerifyFail, binding.NodeReject, binding.OperatorReject, binding.Cancel, binding.Expire,
		10, 255,
	}
)

func compareTransitions(a, b binding.Transition) int {
	return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.On, b.On))
}

func TestTransitionsListTheTable(t *testing.T) {
	got := slices.SortedFunc(slices.Values(binding.Transitions()), compareTransitions)
	want := slices.SortedFunc(slices.Values(wantTransitions), compareTransitions)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Fatalf("Transitions() (-want, +got):\n%s", diff)
	}
}

// sessionIn returns a session of the fixture in state st, far from its expiry.
func sessionIn(t *testing.T, st binding.State) binding.BindingSession {
	t.Helper()
	s, _ := newFixture().build(t)
	s.State = st
	return s
}

func TestApplyEveryRow(t *testing.T) {
	now := t0.Add(2 * time.Minute)
	for _, row := range wantTransitions {
		t.Run(row.From.String()+"/"+row.On.String(), func(t *testing.T) {
			s := sessionIn(t, row.From)
			snapshot := sessionIn(t, row.From)
			got, err := binding.Apply(s, row.On, now.Add(300*time.Millisecond))
			wantCode(t, err, "")
			if got.State != row.To {
				t.Fatalf("state %s, want %s", got.State, row.To)
			}
			if !got.UpdatedAt.Equal(now) {
				t.Errorf("UpdatedAt %v, want %v (the clock truncated to seconds)", got.UpdatedAt, now)
			}
			if wantActivated := row.To == binding.Active; wantActivated != !got.ActivatedAt.IsZero() {
				t.Errorf("ActivatedAt %v after a move to %s", got.ActivatedAt, row.To)
			}
			if diff := gocmp.Diff(snapshot, s); diff != "" {
				t.Errorf("Apply changed its input (-before, +after):\n%s", diff)
			}
		})
	}
}

func TestApplyRefusesEveryOtherPair(t *testing.T) {
	inTable := map[binding.Transition]bool{}
	for _, row := range wantTransitions {
		inTable[binding.Transition{From: row.From, On: row.On}] = true
	}
	now := t0.Add(2 * time.Minute)
	refused := 0
	for _, st := range allStates {
		for _, ev := range allEvents {
			if inTable[binding.Transition{From: st, On: ev}] {
				continue
			}
			refused++
			want := proto.BadState
			if st == binding.Active && alreadyActiveEvents[ev] {
				want = proto.AlreadyActive
			}
			t.Run(st.String()+"/"+ev.String(), func(t *testing.T) {
				s := sessionIn(t, st)
				got, err := binding.Apply(s, ev, now)
				wantCode(t, err, want)
				if diff := gocmp.Diff(s, got); diff != "" {
					t.Errorf("a refused event changed the session (-before, +after):\n%s", diff)
				}
			})
		}
	}
	if want := len(allStates)*len(allEvents) - len(wantTransitions); refused != want {
		t.Fatalf("walked %d refused pairs, want %d", refused, want)
	}
}

func TestExpiryOnAccess(t *testing.T) {
	open := []binding.State{binding.Initiated, binding.PendingOperator, binding.PendingNodeAcceptance, binding.Verifying}
	for _, st := range open {
		for _, ev := range allEvents {
			t.Run(st.String()+"/"+ev.String(), func(t *testing.T) {
				s := sessionIn(t, st)
				got, err := binding.Apply(s, ev, tExpires)
				if got.State != binding.Expired {
					t.Fatalf("state %s at expires_at, want EXPIRED", got.State)
				}
				if !got.UpdatedAt.Equal(tExpires) {
					t.Errorf("UpdatedAt %v, want %v", got.UpdatedAt, tExpires)
				}
				if ev == binding.Expire {
					wantCode(t, err, "")
				} else {
					wantCode(t, err, proto.BadState)
				}
			})
		}
	}

	t.Run("one second before", func(t *testing.T) {
		s := sessionIn(t, binding.Initiated)
		for _, now := range []time.Time{tExpires.Add(-time.Second), tExpires.Add(-time.Nanosecond)} {
			got, err := binding.Apply(s, binding.Resolve, now)
			wantCode(t, err, "")
			if got.State != binding.PendingOperator {
				t.Errorf("at %v: state %s, want PENDING_OPERATOR", now, got.State)
			}
		}
	})
	t.Run("ExpireIfDue", func(t *testing.T) {
		for _, st := range allStates {
			s := sessionIn(t, st)
			before := binding.ExpireIfDue(s, tExpires.Add(-time.Second))
			after := binding.ExpireIfDue(s, tExpires)
			if before.State != st {
				t.Errorf("%s: expired before expires_at", st)
			}
			want := st
			if slices.Contains(open, st) {
				want = binding.Expired
			}
			if after.State != want {
				t.Errorf("%s at expires_at: %s, want %s", st, after.State, want)
			}
			if s.State != st {
				t.Errorf("ExpireIfDue changed its input")
			}
		}
	})
	t.Run("stored EXPIRED does not expire again", func(t *testing.T) {
		s := sessionIn(t, binding.Expired)
		_, err := binding.Apply(s, binding.Expire, tExpires.Add(time.Hour))
		wantCode(t, err, proto.BadState)
	})
}

func TestTerminalNeverMoves(t *testing.T) {
	for _, st := range []binding.State{binding.Active, binding.Expired, binding.RejectedByOperator, binding.RejectedByNode, binding.Cancelled} {
		if !st.Terminal() {
			t.Fatalf("%s is not terminal", st)
		}
		s := sessionIn(t, st)
		for _, now := range []time.Time{t0, tExpires, tExpires.Add(48 * time.Hour)} {
			for _, ev := range allEvents {
				got, err := binding.Apply(s, ev, now)
				if err == nil || got.State != st {
					t.Errorf("%s/%s at %v: moved to %s (err %v)", st, ev, now, got.State, err)
				}
			}
		}
	}
}

func TestRepairAtStart(t *testing.T) {
	for _, tc := range []struct {
		from binding.State
		now  time.Time
		want binding.State
	}{
		{binding.Verifying, t0.Add(time.Minute), binding.PendingNodeAcceptance},
		{binding.Verifying, tExpires, binding.Expired},
		{binding.PendingNodeAcceptance, t0.Add(time.Minute), binding.PendingNodeAcceptance},
		{binding.Initiated, tExpires, binding.Expired},
		{binding.Active, tExpires.Add(time.Hour), binding.Active},
		{binding.Cancelled, t0, binding.Cancelled},
	} {
		if got := binding.RepairAtStart(sessionIn(t, tc.from), tc.now); got.State != tc.want {
			t.Errorf("RepairAtStart(%s at %v) = %s, want %s", tc.from, tc.now, got.State, tc.want)
		}
	}
}

func TestStateAndEventNames(t *testing.T) {
	for _, st := range allStates[1:10] {
		back, err := binding.ParseState(st.String())
		if err != nil || back != st {
			t.Errorf("ParseState(%q) = %v, %v", st, back, err)
		}
	}
	var stored struct{ State binding.State }
	if err := json.Unmarshal([]byte(`{"State":"PENDING_NODE_ACCEPTANCE"}`), &stored); err != nil || stored.State != binding.PendingNodeAcceptance {
		t.Errorf("state from JSON: %v, %v", stored.State, err)
	}
	if b, err := json.Marshal(stored); err != nil || string(b) != `{"State":"PENDING_NODE_ACCEPTANCE"}` {
		t.Errorf("state to JSON: %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"State":"DONE"}`), &stored); err == nil {
		t.Error("an unknown state name decoded")
	}
	if _, err := binding.ParseState("State?0"); errorCode(err) != proto.BadRequest {
		t.Errorf("ParseState of an unknown name: %v", err)
	}
	if got := binding.State(42).String(); got != "State?42" {
		t.Errorf("State(42) = %q", got)
	}
	if got := binding.Link(42).String(); got != "Link?42" {
		t.Errorf("Link(42) = %q", got)
	}
	if got := binding.Event(42).String(); got != "Event?42" {
		t.Errorf("Event(42) = %q", got)
	}
}

// modelArrow is an event in an open state; modelArrows are the description's arrows out of
// each open state but cancel and expiry, which leave every one of them.
type modelArrow struct {
	from binding.State
	on   binding.Event
}

var modelArrows = map[modelArrow]binding.State{
	{binding.Initiated, binding.Resolve}:                binding.PendingOperator,
	{binding.PendingOperator, binding.Authorize}:        binding.PendingNodeAcceptance,
	{binding.PendingOperator, binding.OperatorReject}:   binding.RejectedByOperator,
	{binding.PendingNodeAcceptance, binding.Accept}:     binding.Verifying,
	{binding.PendingNodeAcceptance, binding.NodeReject}: binding.RejectedByNode,
	{binding.Verifying, binding.VerifyOK}:               binding.Active,
	{binding.Verifying, binding.VerifyFail}:             binding.PendingNodeAcceptance,
}

// model is the state machine written a second way, from the description's prose, for the
// property test to compare Apply against.
func model(st binding.State, ev binding.Event, now, expires time.Time) (binding.State, proto.Code) {
	open := st == binding.Initiated || st == binding.PendingOperator ||
		st == binding.PendingNodeAcceptance || st == binding.Verifying
	if open && !now.Before(expires) {
		if ev == binding.Expire {
			return binding.Expired, ""
		}
		return binding.Expired, proto.BadState
	}
	if !open {
		if st == binding.Active && alreadyActiveEvents[ev] {
			return st, proto.AlreadyActive
		}
		return st, proto.BadState
	}
	switch ev {
	case binding.Cancel:
		return binding.Cancelled, ""
	case binding.Expire:
		return binding.Expired, ""
	}
	if next, ok := modelArrows[modelArrow{st, ev}]; ok {
		return next, ""
	}
	return st, proto.BadState
}

// TestApplyMatchesModel runs random event sequences with random clock jumps and compares
// every step with the model; a terminal state must never be left.
func TestApplyMatchesModel(t *testing.T) {
	base, _ := newFixture().build(t)
	rapid.Check(t, func(rt *rapid.T) {
		s := base
		s.State = binding.Initiated
		now := t0
		for i := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			jump := rapid.SampledFrom([]time.Duration{0, time.Second, 59 * time.Second, 4 * time.Minute, 11 * time.Minute}).Draw(rt, "jump")
			now = now.Add(jump)
			ev := binding.Event(rapid.IntRange(0, 11).Draw(rt, "event"))
			wantState, want := model(s.State, ev, now, s.ExpiresAt)
			got, err := binding.Apply(s, ev, now)
			if errorCode(err) != want && !(want == "" && err == nil) {
				rt.Fatalf("step %d: %s on %s at +%v: error %v, model says %q", i, ev, s.State, now.Sub(t0), err, want)
			}
			if got.State != wantState {
				rt.Fatalf("step %d: %s on %s at +%v: state %s, model says %s", i, ev, s.State, now.Sub(t0), got.State, wantState)
			}
			if s.State.Terminal() && got.State != s.State {
				rt.Fatalf("step %d: left terminal state %s for %s", i, s.State, got.State)
			}
			s = got
		}
	})
}

// TestActiveOnlyThroughVerifiedChain drives sessions the way the registry does — every
// event, but accept only as Accept then VerifyOK or VerifyFail on the outcome of VerifyChain
// — and checks that ACTIVE is reached only by an accept whose chain verified.
func TestActiveOnlyThroughVerifiedChain(t *testing.T) {
	f := newFixture()
	base, goodAcc := f.build(t)
	badAcc := goodAcc
	badAcc.Signature = tamper(t, goodAcc.Signature)
	rawEvents := []binding.Event{
		binding.Resolve, binding.Authorize, binding.NodeReject, binding.OperatorReject,
		binding.Cancel, binding.Expire, binding.EventInvalid,
	}
	activated := 0
	rapid.Check(t, func(rt *rapid.T) {
		s := base
		s.State = rapid.SampledFrom([]binding.State{binding.Initiated, binding.PendingOperator, binding.PendingNodeAcceptance}).Draw(rt, "start")
		now := t0
		for i := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(0, 120).Draw(rt, "seconds")) * time.Second)
			before := s.State
			verified := false
			if rapid.Bool().Draw(rt, "accept") {
				acc := goodAcc
				if rapid.Bool().Draw(rt, "broken") {
					acc = badAcc
				}
				verifying, err := binding.Apply(s, binding.Accept, now)
				if err == nil {
					if binding.VerifyChain(verifying, acc, prefix) == nil {
						verified = true
						verifying, err = binding.Apply(verifying, binding.VerifyOK, now)
					} else {
						verifying, err = binding.Apply(verifying, binding.VerifyFail, now)
					}
					if err != nil {
						rt.Fatalf("step %d: the verification outcome did not apply: %v", i, err)
					}
				}
				s = verifying
			} else {
				s, _ = binding.Apply(s, rapid.SampledFrom(rawEvents).Draw(rt, "event"), now)
			}
			if s.State == binding.Verifying {
				rt.Fatalf("step %d: VERIFYING outlived the accept", i)
			}
			if s.State == binding.Active && before != binding.Active {
				if !verified {
					rt.Fatalf("step %d: became ACTIVE from %s without a verified chain", i, before)
				}
				activated++
			}
			if before.Terminal() && s.State != before {
				rt.Fatalf("step %d: left terminal state %s", i, before)
			}
		}
	})
	if activated == 0 {
		t.Fatal("no sequence reached ACTIVE: the property was never exercised")
	}
}

func BenchmarkApply(b *testing.B) {
	s, _ := newFixture().build(b)
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		v, err := binding.Apply(s, binding.Accept, now)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := binding.Apply(v, binding.VerifyOK, now); err != nil {
			b.Fatal(err)
		}
	}
}

// Every refusal matches its package sentinel under errors.Is, whatever its detailed text.
func TestSentinels(t *testing.T) {
	f := newFixture()
	s, acc := f.build(t)
	broken := acc
	broken.Signature = ""
	az := f.authorization(t)
	az.SingleLimit = f64(100)
	for _, tc := range []struct {
		err  error
		want error
	}{
		{second(binding.Apply(sessionIn(t, binding.Cancelled), binding.Resolve, t0)), binding.ErrBadState},
		{second(binding.Apply(sessionIn(t, binding.Active), binding.Accept, t0)), binding.ErrAlreadyActive},
		{binding.VerifyChain(s, broken, prefix), binding.ErrBadSignature},
		{binding.CheckScope(s.Request, az.Authorization), binding.ErrScopeExceeded},
		{binding.CheckAcceptanceShape(binding.Acceptance{}), binding.ErrBadRequest},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%v does not match %v", tc.err, tc.want)
		}
	}
	for _, sentinel := range []error{
		binding.ErrBadState, binding.ErrAlreadyActive, binding.ErrTTLTooLong, binding.ErrAlreadyExpired,
		binding.ErrBadRequest, binding.ErrBadSignature, binding.ErrPermissionDenied, binding.ErrScopeExceeded,
		binding.ErrAuthzExpired, binding.ErrRateLimited, binding.ErrSessionExists,
	} {
		if errorCode(sentinel) == proto.Internal {
			t.Errorf("sentinel %v has no code", sentinel)
		}
	}
}

func second[T any](_ T, err error) error { return err }
