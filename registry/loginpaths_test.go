package registry_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The two login paths — challenges consumed in memory, and in the store for registries that
// share it — write the same records and refuse alike: a good login leaves identical session
// and pin records, a revoked credential gets the same answer, and so does a credential
// revoked while its login is under way, between the checks and the session's write.
func TestLoginPathsAgree(t *testing.T) {
	ctx := context.Background()
	type path struct {
		svc *registry.Service
		st  *challengeStore
	}
	var paths [2]path
	for i, inStore := range []bool{false, true} {
		st := &challengeStore{Store: store.NewMemory(), used: map[string]bool{}}
		// The same randomness and clock for both, so that both issue the same tokens.
		svc, err := registry.New(registry.Config{Store: st, Clock: func() time.Time { return epoch },
			Rand: rand.NewChaCha8([32]byte{1}), ChallengesInStore: inStore})
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = path{svc, st}
	}
	op := newOperator(t, "op", epoch, "nodes.bind")
	lost := op.newDevice(t, "lost", "rev-lost")
	stolen := op.newDevice(t, "stolen", "rev-stolen")
	login := func(p path, o operator) (api.LoginResult, error) {
		ch, err := p.svc.Challenge()
		if err != nil {
			t.Fatal(err)
		}
		return p.svc.Login(ctx, o.loginRequest(t, ch.Challenge, epoch), "192.0.2.1")
	}
	type outcome struct {
		res      api.LoginResult
		code     string
		msg      string
		sessions []authn.BearerSession
		pin      store.OperatorPin
	}
	// records is what a path answered and what its store holds of op afterwards.
	records := func(p path, res api.LoginResult, err error) outcome {
		out := outcome{res: res}
		if err != nil {
			out.code, out.msg = string(proto.CodeOf(err)), err.Error()
		}
		d, derr := didkey.Parse(op.did)
		if derr != nil {
			t.Fatal(derr)
		}
		err = p.st.View(ctx, func(tx store.Tx) error {
			hashes, err := tx.BearerSessionsOf(op.did)
			if err != nil {
				return err
			}
			for _, h := range hashes {
				s, err := tx.BearerSession(h)
				if err != nil {
					return err
				}
				out.sessions = append(out.sessions, s)
			}
			out.pin, err = tx.OperatorPin(d.Body())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, step := range []struct {
		name string
		code string // of the answer; "" for a session
		run  func(p path) (api.LoginResult, error)
	}{
		{"a good login", "", func(p path) (api.LoginResult, error) { return login(p, op) }},
		{"a revoked credential", "DC_REVOKED", func(p path) (api.LoginResult, error) {
			if _, err := p.svc.Revoke(ctx, op.revocation(t, op.root, "rev-lost", epoch), "198.51.100.1"); err != nil {
				t.Fatal(err)
			}
			return login(p, lost)
		}},
		{"a credential revoked during its login", "DC_REVOKED", func(p path) (api.LoginResult, error) {
			p.st.beforeUpdate(func() {
				if _, err := p.svc.Revoke(ctx, op.revocation(t, op.root, "rev-stolen", epoch), "198.51.100.1"); err != nil {
					t.Error(err)
				}
			})
			return login(p, stolen)
		}},
	} {
		var got [2]outcome
		for i, p := range paths {
			res, err := step.run(p)
			got[i] = records(p, res, err)
		}
		if got[0].code != step.code {
			t.Errorf("%s: answered %q (%s), want %q", step.name, got[0].code, got[0].msg, step.code)
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("%s: the paths differ:\nin memory: %+v\nin the store: %+v", step.name, got[0], got[1])
		}
	}
}

// challengeStore is a memory store whose transactions consume login challenges, as the
// PostgreSQL store's do, so that a registry takes the login path of a shared store without
// a database. What it consumes stays consumed even when a transaction is undone; the test
// above never relies on an undone consumption.
type challengeStore struct {
	store.Store
	mu     sync.Mutex
	used   map[string]bool
	before func() // runs once, before the next Update
}

// beforeUpdate makes fn run once, before the next Update begins.
func (s *challengeStore) beforeUpdate(fn func()) { s.before = fn }

func (s *challengeStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.View(ctx, func(tx store.Tx) error { return fn(challengeTx{tx, s}) })
}

func (s *challengeStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if before := s.before; before != nil {
		s.before = nil
		before()
	}
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(challengeTx{tx, s}) })
}

type challengeTx struct {
	store.Tx
	s *challengeStore
}

func (t challengeTx) ConsumeChallenge(id []byte, _ time.Time) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.used[string(id)] {
		return store.ErrChallengeUsed
	}
	t.s.used[string(id)] = true
	return nil
}
