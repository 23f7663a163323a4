package daemon

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/pgtest"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// multiStepTimeout bounds every wait of the multi-daemon tests.
const multiStepTimeout = 20 * time.Second

// threeDaemons starts three svrpd processes on one PostgreSQL schema and returns them with a
// client for each.
func threeDaemons(t *testing.T, extra ...string) ([]*svrpdtest.Daemon, []*client.Client, *svrpdtest.Log) {
	t.Helper()
	url := pgtest.Schema(t)
	log := &svrpdtest.Log{}
	var ds []*svrpdtest.Daemon
	var cs []*client.Client
	for range 3 {
		d := crashStart(t, url, log, extra...)
		c, err := client.New(d.URL, client.WithRetry(client.RetryPolicy{}))
		if err != nil {
			t.Fatal(err)
		}
		ds, cs = append(ds, d), append(cs, c)
	}
	return ds, cs, log
}

// oneNodeOnEach is one new node key seen through each daemon's client, in the order of cs.
func oneNodeOnEach(t *testing.T, cs []*client.Client) []*client.Node {
	t.Helper()
	key := testkit.RandomKey()
	nodes := make([]*client.Node, len(cs))
	for i, c := range cs {
		n, err := client.NewNode(c, key, didkey.FormShort)
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	return nodes
}

// login logs an operator in through c.
func login(t *testing.T, c *client.Client) *client.Operator {
	t.Helper()
	root, device := testkit.RandomKey(), testkit.RandomKey()
	cred, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.Login(context.Background(), device, cred)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	return op
}

// on returns op speaking to another daemon with the same session.
func on(op *client.Operator, c *client.Client) *client.Operator {
	o := *op
	o.Client = c
	return &o
}

// TestMultiDaemon runs three daemons on one database and checks that they behave as one
// registry: every step of a binding on a different daemon, a challenge from one accepted by
// another, exactly-once transitions raced across all three, shared resolve limits, listings
// that follow the others, and a daemon killed mid-load without loss.
func TestMultiDaemon(t *testing.T) {
	pgtest.URL(t)
	ds, cs, _ := threeDaemons(t, "--flush-every", "200ms", "--login-failure-address-limit", "1000000", "--login-failure-operator-limit", "1000000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("RegistrationVisibleOnTheOthers", func(t *testing.T) {
		n, err := client.NewNode(cs[0], testkit.RandomKey(), didkey.FormShort)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Register(ctx, "203.0.113.7:7000", []string{"gpu"}, ""); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			nodes, err := cs[1].Nodes(ctx, api.NodeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if slicesHasDID(nodes, n.DID) {
				break
			}
			if time.Since(start) > followWait {
				t.Fatalf("B's GET /nodes lacks the node registered on A %v later", followWait)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("B listed the node registered on A after %v", time.Since(start).Round(time.Millisecond))
		// A heartbeat through C of the node registered on A at once.
		nc, _ := client.NewNode(cs[2], n.Key, didkey.FormShort)
		if _, err := nc.Heartbeat(ctx); err != nil {
			t.Fatalf("heartbeat on C of a node registered on A: %v", err)
		}
	})

	t.Run("BindingJourneyAcrossDaemons", func(t *testing.T) {
		nodes := oneNodeOnEach(t, cs)
		if _, err := nodes[0].Register(ctx, "203.0.113.8:7000", nil, ""); err != nil {
			t.Fatal(err)
		}
		op := login(t, cs[1])
		init, err := nodes[0].Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"infer"}})
		if err != nil {
			t.Fatalf("initiate on A: %v", err)
		}
		view, err := on(op, cs[1]).Resolve(ctx, init.ShortCode)
		if err != nil {
			t.Fatalf("resolve on B: %v", err)
		}
		if _, err := on(op, cs[2]).Authorize(ctx, view, client.Requested(view)); err != nil {
			t.Fatalf("authorize on C: %v", err)
		}
		pending, err := nodes[0].Pending(ctx)
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending on A: %v, %v", pending, err)
		}
		acc, err := nodes[0].Accept(ctx, pending[0])
		if err != nil || acc.State != "ACTIVE" {
			t.Fatalf("accept on A: %+v, %v", acc, err)
		}
		bound, err := cs[2].OperatorNodes(ctx, op.Token, 0)
		if err != nil || bound.Count != 1 {
			t.Fatalf("operator's nodes on C: %+v, %v", bound, err)
		}
	})

	t.Run("ChallengeFromAnotherDaemon", func(t *testing.T) {
		// The challenge is fetched from B; the login goes to A.
		route := &splitTransport{challenge: ds[1].URL, rest: ds[0].URL}
		c, err := client.New(ds[0].URL, client.WithHTTPClient(&http.Client{Transport: route}), client.WithRetry(client.RetryPolicy{}))
		if err != nil {
			t.Fatal(err)
		}
		login(t, c)
		if route.challenges.Load() != 1 || route.logins.Load() != 1 {
			t.Fatalf("challenges from B %d, logins on A %d; want 1 and 1", route.challenges.Load(), route.logins.Load())
		}

		// race sends the login body attempts times, spread over the three daemons at once,
		// and counts the sessions and the BAD_CHALLENGE answers.
		const attempts = 64
		race := func(what string, body []byte) (ok, bad int32) {
			var oks, bads atomic.Int32
			testkit.Together(attempts, func(i int) {
				resp, err := http.Post(ds[i%3].URL+"/v1/auth/device-login", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusOK:
					oks.Add(1)
				case strings.Contains(string(raw), string(proto.BadChallenge)):
					bads.Add(1)
				default:
					t.Errorf("%s login: %d %s", what, resp.StatusCode, raw)
				}
			})
			return oks.Load(), bads.Load()
		}

		// The same signed login raced across the three daemons: exactly one session.
		ok, bad := race("replayed", route.loginBody())
		// The login above already consumed the challenge: every replay is refused.
		if ok != 0 || bad != attempts {
			t.Errorf("replays of a used challenge: %d sessions, %d BAD_CHALLENGE; want 0 and %d", ok, bad, attempts)
		}

		// A fresh challenge, its login raced: exactly one session.
		route2 := &splitTransport{challenge: ds[2].URL, rest: ds[2].URL, hold: true}
		c2, _ := client.New(ds[2].URL, client.WithHTTPClient(&http.Client{Transport: route2}), client.WithRetry(client.RetryPolicy{}))
		root, device := testkit.RandomKey(), testkit.RandomKey()
		cred, _ := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{})
		c2.Login(ctx, device, cred) // held: the body is captured, not sent
		ok, bad = race("raced", route2.loginBody())
		if ok != 1 || bad != attempts-1 {
			t.Errorf("one challenge raced over three daemons: %d sessions, %d BAD_CHALLENGE; want 1 and %d", ok, bad, attempts-1)
		}
	})

	t.Run("AcceptsRaced", func(t *testing.T) {
		nodes := oneNodeOnEach(t, cs)
		if _, err := nodes[1].Register(ctx, "203.0.113.9:7000", nil, ""); err != nil {
			t.Fatal(err)
		}
		op := login(t, cs[0])
		init, err := nodes[1].Initiate(ctx, client.InitiateOptions{TaskTypes: []string{"infer"}})
		if err != nil {
			t.Fatal(err)
		}
		view, err := op.Resolve(ctx, init.ShortCode)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := on(op, cs[1]).Authorize(ctx, view, client.Requested(view)); err != nil {
			t.Fatal(err)
		}
		pending, err := nodes[2].Pending(ctx)
		if err != nil || len(pending) != 1 {
			t.Fatalf("pending: %v, %v", pending, err)
		}
		const accepts = 32
		var active atomic.Int32
		testkit.Together(accepts, func(i int) {
			res, err := nodes[i%3].Accept(ctx, pending[0])
			if err == nil && res.State == "ACTIVE" {
				active.Add(1)
				return
			}
			if code := client.CodeOf(err); code != proto.AlreadyActive && code != proto.BadState {
				t.Errorf("a losing accept: %v", err)
			}
		})
		if active.Load() != 1 {
			t.Errorf("%d of %d raced accepts activated, want 1", active.Load(), accepts)
		}
		bound, err := cs[1].OperatorNodes(ctx, op.Token, 0)
		if err != nil || bound.Count != 1 {
			t.Errorf("bindings after the race: %+v, %v; want one", bound, err)
		}
		st, err := cs[2].Status(ctx, init.BindingSessionID)
		if err != nil || st.State != "ACTIVE" {
			t.Errorf("status after the race: %+v, %v", st, err)
		}
	})

	t.Run("ResolveFailuresCountedAcrossDaemons", func(t *testing.T) {
		op := login(t, cs[0])
		code, err := binding.NewShortCode(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		for i := range binding.ResolveFailureLimit {
			_, err := on(op, cs[i%3]).Resolve(ctx, code)
			if client.CodeOf(err) != proto.NotFound {
				t.Fatalf("failure %d on daemon %d: %v, want NOT_FOUND", i+1, i%3, err)
			}
		}
		for i := range 3 {
			_, err := on(op, cs[i]).Resolve(ctx, code)
			if client.CodeOf(err) != proto.RateLimited {
				t.Errorf("attempt %d on daemon %d: %v, want RATE_LIMITED", binding.ResolveFailureLimit+1, i, err)
			}
		}
	})

	t.Run("KillOneMidLoad", func(t *testing.T) {
		// Workers register nodes through every daemon; C is killed with SIGKILL while they
		// run. Every registration acknowledged, by any daemon, must be listed afterwards,
		// and A and B keep serving throughout. The nodes register under full DIDs: a short
		// DID is 32 bits of a hash, and among the many random keys of a run two now and then
		// share one, which the registry rightly refuses as DID_COLLISION.
		var mu sync.Mutex
		var acked []string
		var afterKill atomic.Int32
		var killed atomic.Bool
		workers := testkit.StartWorkers(6, func(w int) bool {
			d := w % 3
			n, _ := client.NewNode(cs[d], testkit.RandomKey(), didkey.FormFull)
			_, err := n.Register(ctx, "203.0.113.10:7000", nil, "")
			if err != nil {
				if d == 2 && killed.Load() {
					time.Sleep(10 * time.Millisecond)
					return true
				}
				t.Errorf("registration on daemon %d: %v", d, err)
				return false
			}
			mu.Lock()
			acked = append(acked, n.DID)
			mu.Unlock()
			if killed.Load() && d != 2 {
				afterKill.Add(1)
			}
			return true
		})
		// C is killed once registrations are acknowledged, and the workers stopped once A
		// and B have acknowledged more after it.
		workers.Until(t, "registrations acknowledged before the kill", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= registrationsAroundKill
		})
		killed.Store(true)
		ds[2].Signal(t, syscall.SIGKILL)
		workers.Until(t, "registrations acknowledged by A or B after the kill", func() bool { return afterKill.Load() >= registrationsAroundKill })
		workers.Stop()
		// A's listing follows the others.
		lost, deadline := 0, time.Now().Add(followWait)
		for {
			nodes, err := cs[0].Nodes(ctx, api.NodeFilter{})
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, n := range nodes {
				have[n.DID] = true
			}
			lost = 0
			for _, did := range acked {
				if !have[did] {
					lost++
				}
			}
			if lost == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if lost > 0 {
			t.Errorf("%d of %d acknowledged registrations are missing after C was killed", lost, len(acked))
		}
	})
}

// followWait bounds a test's wait for one daemon to list what another acknowledged, which
// they do within a second.
const followWait = testkit.WaitBound

// registrationsAroundKill is how many registrations the kill test waits for before it kills
// a daemon, and again from the two others after.
const registrationsAroundKill = 20

func slicesHasDID(nodes []api.NodeView, did string) bool {
	for _, n := range nodes {
		if n.DID == did {
			return true
		}
	}
	return false
}

// splitTransport sends POST /v1/auth/challenge to one daemon and everything else to another,
// and keeps the body of the last device login. With hold, device logins are kept, not sent.
type splitTransport struct {
	challenge, rest    string
	hold               bool
	challenges, logins atomic.Int32
	mu                 sync.Mutex
	body               []byte
}

var errHeld = errors.New("held")

func (s *splitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := s.rest
	switch {
	case strings.HasSuffix(r.URL.Path, "/v1/auth/challenge"):
		base = s.challenge
		s.challenges.Add(1)
	case strings.HasSuffix(r.URL.Path, "/v1/auth/device-login"):
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.body = raw
		s.mu.Unlock()
		if s.hold {
			return nil, errHeld
		}
		s.logins.Add(1)
		r.Body = io.NopCloser(bytes.NewReader(raw))
	}
	u := *r.URL
	target := strings.TrimPrefix(base, "http://")
	u.Host = target
	r2 := r.Clone(r.Context())
	r2.URL = &u
	r2.Host = target
	return http.DefaultTransport.RoundTrip(r2)
}

func (s *splitTransport) loginBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body
}
