package registry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
)

// TestRevocationProperty: after a revocation, no sequence of requests with the revoked
// credential logs in, authorizes, or leaves a binding it made active (docs/protocol.md §10.5).
// Random interleavings of logins, handshakes cut at any step, unbinds, revocations of device and
// authorization ids, and time passing run against the service; after every step the store
// holds no bearer session of a revoked credential and no binding that a revoked credential
// made, and every login or authorize with one was refused with its code.
func TestRevocationProperty(t *testing.T) {
	ctx := context.Background()
	base := newOperator(t, "op", epoch, "nodes.bind")
	devices := []operator{base.newDevice(t, "a", "rev-a"), base.newDevice(t, "b", "rev-b")}
	nodes := []node{newNode(t, "n0"), newNode(t, "n1")}
	authzIDs := []string{"az-1", "az-2"}
	pairs := []string{"rev-a", "rev-b", "az-1", "az-2"}

	rapid.Check(t, func(rt *rapid.T) {
		c := testkit.NewClock(epoch)
		st := store.NewMemory()
		defer st.Close()
		svc, err := registry.New(registry.Config{Store: st, Clock: c.Now, Limits: limits.Limits{InitiateAddressLimit: 1 << 30, LoginFailureAddressLimit: 1 << 30, LoginFailureOperatorLimit: 1 << 30}})
		if err != nil {
			rt.Fatal(err)
		}
		revoked := authn.RevocationSet{}
		isRevoked := func(id string) bool { return revoked[authn.RevocationKey{OperatorDID: base.did, RevocationID: id}] }
		tokens := map[int]string{} // device → a token that logged in
		type pendingSession struct {
			id   string
			node int
		}
		var pending []pendingSession
		var active []string
		seq := 0

		login := func(d int) (string, error) {
			ch, err := svc.Challenge()
			if err != nil {
				return "", err
			}
			res, err := svc.Login(ctx, devices[d].loginRequest(t, ch.Challenge, c.Now()), "192.0.2.1")
			if err == nil {
				tokens[d] = res.SessionToken
			}
			return res.SessionToken, err
		}

		// acceptPending has the node accept pending session i: it becomes ACTIVE unless a
		// credential that made it was revoked meanwhile (the revocation's code, state kept) or
		// it expired.
		acceptPending := func(rt *rapid.T, i int) {
			p := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			n := nodes[p.node]
			res, err := svc.Pending(ctx, n.poll(t, c.Now()))
			if err != nil {
				rt.Fatalf("poll: %v", err)
			}
			for _, pa := range res.Pending {
				if pa.BindingSessionID != p.id {
					continue
				}
				_, err := svc.Accept(ctx, p.id, n.acceptance(t, pa, true, c.Now()).Acceptance)
				dcRevoked := isRevoked(pa.DeviceCredential.RevocationID)
				azRevoked := isRevoked(pa.AuthorizationCredential.RevocationID)
				switch {
				case dcRevoked && proto.CodeOf(err) != proto.DCRevoked:
					rt.Fatalf("accept of a revoked credential's authorization: %v, want DC_REVOKED", err)
				case !dcRevoked && azRevoked && proto.CodeOf(err) != proto.AuthzRevoked:
					rt.Fatalf("accept of a revoked authorization: %v, want AUTHZ_REVOKED", err)
				case !dcRevoked && !azRevoked && err != nil:
					rt.Fatalf("accept: %v", err)
				case err == nil:
					active = append(active, p.id)
				}
				if err != nil {
					pending = append(pending, p) // still PENDING_NODE_ACCEPTANCE
				}
				return
			}
			// Not pending any more: it expired while waiting.
		}

		rt.Repeat(map[string]func(*rapid.T){
			"login": func(rt *rapid.T) {
				d := rapid.IntRange(0, 1).Draw(rt, "device")
				_, err := login(d)
				if isRevoked(devices[d].cred.RevocationID) {
					if proto.CodeOf(err) != proto.DCRevoked {
						rt.Fatalf("login of a revoked device: %v, want DC_REVOKED", err)
					}
				} else if err != nil {
					rt.Fatalf("login: %v", err)
				}
			},
			"handshake": func(rt *rapid.T) {
				d := rapid.IntRange(0, 1).Draw(rt, "device")    // whose credential authorizes
				via := rapid.IntRange(0, 1).Draw(rt, "session") // whose bearer session carries it
				n := rapid.IntRange(0, 1).Draw(rt, "node")      // which node
				azID := rapid.SampledFrom(authzIDs).Draw(rt, "authz")
				accept := rapid.Bool().Draw(rt, "accept now")
				token, ok := tokens[via]
				if !ok {
					return
				}
				op, err := svc.Authenticate(ctx, "Bearer "+token)
				if err != nil {
					if isRevoked(devices[via].cred.RevocationID) && proto.CodeOf(err) != proto.NoSession {
						rt.Fatalf("session of a revoked device: %v, want NO_SESSION", err)
					}
					delete(tokens, via)
					return
				}
				if isRevoked(devices[via].cred.RevocationID) {
					rt.Fatalf("a revoked device's session still authenticates")
				}
				seq++
				id := fmt.Sprintf("bs-%d", seq)
				ini, err := svc.Initiate(ctx, nodes[n].initiate(t, id, c.Now(), num(10), nil), "192.0.2.1")
				if err != nil {
					return // e.g. too many open sessions for the node
				}
				view, err := svc.Resolve(ctx, op, api.ResolveRequest{ShortCode: ini.ShortCode}, "192.0.2.1")
				if err != nil {
					rt.Fatalf("resolve: %v", err)
				}
				req := devices[d].authorize(t, view, c.Now(), num(5), nil)
				req.AuthorizationCredential.RevocationID = azID
				req.AuthorizationCredential.Signature = sign(t, devices[d].device, req.AuthorizationCredential.Authorization)
				_, err = svc.Authorize(ctx, op, req)
				switch {
				case isRevoked(devices[d].cred.RevocationID):
					if proto.CodeOf(err) != proto.DCRevoked {
						rt.Fatalf("authorize with a revoked credential: %v, want DC_REVOKED", err)
					}
					return
				case isRevoked(azID):
					if proto.CodeOf(err) != proto.AuthzRevoked {
						rt.Fatalf("authorize with a revoked authorization: %v, want AUTHZ_REVOKED", err)
					}
					return
				case err != nil:
					rt.Fatalf("authorize: %v", err)
				}
				pending = append(pending, pendingSession{id, n})
				if accept {
					acceptPending(rt, len(pending)-1)
				}
			},
			"accept": func(rt *rapid.T) {
				if len(pending) == 0 {
					return
				}
				acceptPending(rt, rapid.IntRange(0, len(pending)-1).Draw(rt, "which"))
			},
			"revoke": func(rt *rapid.T) {
				id := rapid.SampledFrom(pairs).Draw(rt, "revocation_id")
				if _, err := svc.Revoke(ctx, base.revocation(t, base.root, id, c.Now()), "192.0.2.1"); err != nil {
					rt.Fatalf("revoke: %v", err)
				}
				revoked[authn.RevocationKey{OperatorDID: base.did, RevocationID: id}] = true
			},
			"unbind": func(rt *rapid.T) {
				if len(active) == 0 {
					return
				}
				id := rapid.SampledFrom(active).Draw(rt, "session")
				_, err := svc.UnbindByOperator(ctx, id, authn.Operator{DID: base.did})
				if err != nil && proto.CodeOf(err) != proto.BadState {
					rt.Fatalf("unbind: %v", err)
				}
			},
			"wait": func(rt *rapid.T) {
				c.Advance(time.Duration(rapid.IntRange(1, 400).Draw(rt, "seconds")) * time.Second)
			},
			"": func(rt *rapid.T) {
				err := st.View(ctx, func(tx store.Tx) error {
					if err := tx.EachBearerSession(func(_ [32]byte, s authn.BearerSession) error {
						if isRevoked(s.RevocationID) {
							return fmt.Errorf("a bearer session of revoked credential %s survives", s.RevocationID)
						}
						return nil
					}); err != nil {
						return err
					}
					bs, err := tx.BindingsByOperator(base.did)
					if err != nil {
						return err
					}
					for _, b := range bs {
						s, err := tx.BindingSession(b.SessionID)
						if err != nil {
							return err
						}
						if r, err := binding.BindingRevoked(b, s, revoked); err != nil || r {
							return errors.Join(err, fmt.Errorf("binding %s made by a revoked credential is active", b.SessionID))
						}
					}
					return nil
				})
				if err != nil {
					rt.Fatal(err)
				}
			},
		})
	})
}
