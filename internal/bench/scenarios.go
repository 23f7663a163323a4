package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"time"

	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/abuse/attack"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// A scenario prepares and signs what its window sends before the window begins, so that
// signing does not compete with the daemon for the CPU while it is measured.

const (
	// Heartbeat rounds are signed one second of ts apart, from heartbeatLead seconds in the
	// past to at most heartbeatAhead in the future, so that every ts stays inside the
	// registry's 300 s window while it is sent.
	heartbeatLead  = 240
	heartbeatAhead = 280
	// maxPrepared bounds what a scenario prepares, for the generator's memory.
	maxPrepared = 500_000
	// maxAccepts bounds the sessions accept carries to the node's acceptance in setup, which
	// costs three requests each.
	maxAccepts = 50_000
)

// registerNodes registers n new nodes, signed, and returns them.
func (b *bench) registerNodes(ctx context.Context, t *target, n int) ([]*client.Node, error) {
	start := time.Now()
	c := t.client(b.cfg.prefix)
	nodes := make([]*client.Node, n)
	err := parallel(ctx, n, 16, func(i int) error {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		nd, err := client.NewNode(c, key, didkey.FormShort)
		if err != nil {
			return err
		}
		// v1 registrations, as most of the live network's nodes send.
		nd.RegisterV1 = true
		endpoint := fmt.Sprintf("10.%d.%d.%d:9000", i>>16&0xff, i>>8&0xff, i&0xff)
		res, err := nd.Register(ctx, endpoint, []string{"inference"}, "bench")
		if client.CodeOf(err) == proto.DIDCollision {
			// Another key holds this short body: the node takes its 10-hex form, as the
			// protocol tells a colliding node to.
			did, _ := didkey.NodeDID(nd.PublicKey(), didkey.FormFallback)
			nd.DID = did.String()
			res, err = nd.Register(ctx, endpoint, []string{"inference"}, "bench")
		}
		switch {
		case client.CodeOf(err) == proto.RateLimited:
			return fmt.Errorf("registering a node: %w: the registry limits new node keys per client address; start it with a larger --register-address-limit, or let bench spawn it", err)
		case err != nil:
			return fmt.Errorf("registering a node: %w", err)
		case !res.Signed:
			return errors.New("the registry recorded a registration without verifying its signature: is --prefix the registry's?")
		}
		nodes[i] = nd
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.note("registered %s nodes in %.1fs", group(float64(n)), time.Since(start).Seconds())
	return nodes, nil
}

// sized prepares as many requests as the window is likely to need, at most limit: it sends
// batches untimed, each sized from the rate of the one before, until one takes long enough
// to tell the rate of a warm daemon, and prepares that rate over --duration twice over.
func (b *bench) sized(ctx context.Context, t *target, clients, limit int, what string, prepare func(k int) ([]request, error)) ([]request, error) {
	const warm = 300 * time.Millisecond
	limit = min(limit, int(min(b.cfg.requests, maxPrepared)))
	batch := min(max(clients*16, 64), limit)
	var rate float64
	for round := 0; ; round++ {
		reqs, err := prepare(batch)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		err = parallel(ctx, len(reqs), clients, func(i int) error {
			if _, o := t.exchange(ctx, reqs[i]); o.failed != "" {
				return fmt.Errorf("%s: %s", what, o.failed)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("warming up: %w", err)
		}
		took := time.Since(start)
		rate = float64(len(reqs)) / took.Seconds()
		// The first batch meets a cold daemon; a later one that lasts decides.
		if (round > 0 && took >= warm) || batch >= limit || round == 3 {
			break
		}
		batch = min(max(int(rate*warm.Seconds()*1.5), 2*batch), limit)
	}
	k := min(int(2*rate*b.cfg.duration.Seconds())+16*clients, limit)
	start := time.Now()
	reqs, err := prepare(k)
	if err != nil {
		return nil, err
	}
	b.note("prepared %s %s in %.1fs", group(float64(k)), what, time.Since(start).Seconds())
	return reqs, nil
}

// heartbeats prepares signed heartbeats for nodes in rounds: every round gives every node a
// heartbeat with a ts one second later than its last, because the registry answers a ts it
// has already seen without writing anything, and a bench that replayed one heartbeat per
// node would measure that cheaper path. Nodes are many more than clients, so a node's
// heartbeats leave in ts order.
func (b *bench) heartbeats(ctx context.Context, t *target, nodes []*client.Node, clients int) ([]request, error) {
	nextTS := time.Now().Unix() - heartbeatLead
	return b.sized(ctx, t, clients, len(nodes)*(heartbeatLead+heartbeatAhead), "heartbeats", func(k int) ([]request, error) {
		rounds := min((k+len(nodes)-1)/len(nodes), int(time.Now().Unix()+heartbeatAhead-nextTS))
		reqs := make([]request, rounds*len(nodes))
		first := nextTS
		nextTS += int64(rounds)
		err := parallel(ctx, len(reqs), runtime.NumCPU(), func(i int) error {
			nd := nodes[i%len(nodes)]
			req, err := nd.SignHeartbeat(first + int64(i/len(nodes)))
			if err != nil {
				return err
			}
			reqs[i], err = post("/api/v1/heartbeat", req, nil)
			return err
		})
		return reqs, err
	})
}

// post is a prepared POST of v as JSON.
func post(path string, v any, header http.Header) (request, error) {
	body, err := json.Marshal(v)
	return request{method: http.MethodPost, path: path, body: body, header: header}, err
}

// logins fetches one challenge per login and signs a device-login of one operator for each.
func (b *bench) logins(ctx context.Context, t *target, clients int) ([]request, error) {
	op, err := attack.NewOperator()
	if err != nil {
		return nil, err
	}
	c := t.client(b.cfg.prefix)
	issued := canonical.FormatTime(time.Now())
	return b.sized(ctx, t, clients, maxPrepared, "device-logins, each on a challenge of its own", func(k int) ([]request, error) {
		reqs := make([]request, k)
		err := parallel(ctx, k, 2*runtime.NumCPU(), func(i int) error {
			ch, err := c.Challenge(ctx)
			if err != nil {
				return fmt.Errorf("fetching a challenge: %w", err)
			}
			cred := op.Credential
			sig, err := canonical.Sign(op.Device, b.cfg.prefix, canonical.Login{
				OperatorDID: cred.OperatorDID, DevicePublicKey: cred.DevicePublicKey, Challenge: ch.Challenge, IssuedAt: issued,
			})
			if err != nil {
				return err
			}
			reqs[i], err = post("/v1/auth/device-login", map[string]any{
				"device_credential": cred, "challenge": ch.Challenge, "issued_at": issued, "signature": sig,
			}, nil)
			return err
		})
		return reqs, err
	})
}

// accepts carries binding sessions, each of a new node key, to the node's acceptance for one
// logged-in operator (initiate, resolve and authorize sent in setup) and prepares the signed
// acceptances, each of which verifies the whole four-signature chain.
func (b *bench) accepts(ctx context.Context, t *target, clients int) ([]request, error) {
	op, err := attack.NewOperator()
	if err != nil {
		return nil, err
	}
	c := t.client(b.cfg.prefix)
	session, err := op.Login(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("logging the operator in: %w", err)
	}
	var run [6]byte
	rand.Read(run[:])
	seq := 0
	return b.sized(ctx, t, clients, maxAccepts, "acceptances, each session carried through initiate, resolve and authorize", func(k int) ([]request, error) {
		reqs := make([]request, k)
		first := seq
		seq += k
		err := parallel(ctx, k, 2*runtime.NumCPU(), func(i int) error {
			acc, err := b.bindToAcceptance(ctx, c, op, session.Token, fmt.Sprintf("bench-%x-%d", run, first+i))
			if err != nil {
				return err
			}
			reqs[i], err = post("/v1/node/bindings/"+url.PathEscape(acc.BindingSessionID)+"/accept", api.AcceptanceRequest{Acceptance: acc}, nil)
			return err
		})
		return reqs, err
	})
}

// bindToAcceptance initiates session id for a new node key, resolves and authorizes it as
// op, and returns the node's signed acceptance, over the digest of the authorization.
func (b *bench) bindToAcceptance(ctx context.Context, c *client.Client, op attack.Operator, token, id string) (binding.Acceptance, error) {
	prefix := b.cfg.prefix
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return binding.Acceptance{}, err
	}
	k, _ := didkey.KeyFromEd25519(pub)
	nd, _ := didkey.NodeDID(k, didkey.FormFallback)
	now := time.Now()
	at := canonical.FormatTime(now)
	single, grantSingle, grantDaily := 10.0, 5.0, 50.0
	tasks := []string{"inference"}
	ini := binding.InitiateRequest{BindingSession: canonical.BindingSession{
		BindingSessionID: id, NodeDID: nd.String(), NodePublicKey: k.Base58(), DeviceSummary: "bench", OS: "linux", Region: "bench",
		RequestedTaskTypes: tasks, RequestedSingleLimit: &single,
		Nonce: "nonce-" + id, CreatedAt: at, ExpiresAt: canonical.FormatTime(now.Add(client.MaxSessionTTL)),
	}}
	if ini.NodeSignature, err = canonical.Sign(key, prefix, ini.BindingSession); err != nil {
		return binding.Acceptance{}, err
	}
	az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
		BindingSessionID: id, NodeDID: nd.String(), OperatorDID: op.Credential.OperatorDID,
		TaskTypes: tasks, SingleLimit: &grantSingle, DailyLimit: &grantDaily,
		RevocationID: "rev-" + id, IssuedAt: at, ExpiresAt: canonical.FormatTime(now.Add(time.Hour)),
	}}
	if az.Signature, err = canonical.Sign(op.Device, prefix, az.Authorization); err != nil {
		return binding.Acceptance{}, err
	}
	digest, err := az.Digest(prefix)
	if err != nil {
		return binding.Acceptance{}, err
	}
	acc := binding.Acceptance{Acceptance: canonical.Acceptance{
		BindingSessionID: id, NodeDID: nd.String(), OperatorDID: op.Credential.OperatorDID,
		AuthorizationDigest: digest, Accepted: true, IssuedAt: at,
	}}
	if acc.Signature, err = canonical.Sign(key, prefix, acc.Acceptance); err != nil {
		return binding.Acceptance{}, err
	}
	started, err := c.Initiate(ctx, ini)
	if err != nil {
		return binding.Acceptance{}, fmt.Errorf("initiate: %w", err)
	}
	if _, err := c.Resolve(ctx, token, api.ResolveRequest{ShortCode: started.ShortCode}); err != nil {
		return binding.Acceptance{}, fmt.Errorf("resolve: %w", err)
	}
	if _, err := c.Authorize(ctx, token, api.AuthorizeRequest{BindingSessionID: id, DeviceCredential: op.Credential, AuthorizationCredential: az}); err != nil {
		return binding.Acceptance{}, fmt.Errorf("authorize: %w", err)
	}
	return acc, nil
}
