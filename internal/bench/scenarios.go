package bench

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// benchNode is a node the bench registered: its key and the DID it registered under.
type benchNode struct {
	priv ed25519.PrivateKey
	key  didkey.PublicKey
	did  string
}

func newBenchNode() (benchNode, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchNode{}, err
	}
	k, err := didkey.KeyFromEd25519(pub)
	if err != nil {
		return benchNode{}, err
	}
	d, err := didkey.NodeDID(k, didkey.FormShort)
	if err != nil {
		return benchNode{}, err
	}
	return benchNode{priv: priv, key: k, did: d.String()}, nil
}

// registerNodes registers n new nodes, signed, over the run's connections.
func (r *benchRun) registerNodes(n int) ([]benchNode, error) {
	start := time.Now()
	nodes := make([]benchNode, n)
	ws, done, err := r.setupWorkers()
	if err != nil {
		return nil, err
	}
	defer done()
	err = parallel(r.ctx, n, len(ws), func(g, i int) error {
		nd, err := newBenchNode()
		if err != nil {
			return err
		}
		if err := r.register(ws[g], &nd, i); err != nil {
			return err
		}
		nodes[i] = nd
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := r.awaitListed(n); err != nil {
		return nil, err
	}
	r.note("registered %s nodes in %.1fs", group(float64(n)), time.Since(start).Seconds())
	return nodes, nil
}

func (r *benchRun) register(w *worker, nd *benchNode, i int) error {
	endpoint := fmt.Sprintf("10.%d.%d.%d:9000", i>>16&0xff, i>>8&0xff, i&0xff)
	caps := []string{"inference"}
	for attempt := 0; ; attempt++ {
		sig, err := canonical.Sign(nd.priv, r.b.cfg.prefix, canonical.Register{
			DID: nd.did, PublicKey: nd.key.Base58(), Endpoint: endpoint, Capabilities: caps, Region: "bench",
		})
		if err != nil {
			return err
		}
		body, err := json.Marshal(api.RegisterRequest{
			DID: nd.did, PublicKey: nd.key.Hex(), Endpoint: endpoint, Capabilities: caps, Region: "bench", Signature: &sig,
		})
		if err != nil {
			return err
		}
		w.buf = appendRequest(w.buf[:0], "POST", r.t.host, r.t.endpoint("/api/v1/register"), "", body)
		status, err := w.conn.roundTrip(w.buf, time.Now())
		if err != nil {
			return fmt.Errorf("registering a node: %w", err)
		}
		code := answerCode(status, w.conn.body)
		switch {
		case status == http.StatusOK && !bytes.Contains(w.conn.body, []byte(`"signed":true`)):
			return errors.New("the registry recorded a registration without verifying its signature: is --prefix the registry's?")
		case status == http.StatusOK:
			return nil
		case code == "409 DID_COLLISION" && attempt == 0:
			// Another key holds this short body: the node takes its 10-hex form, as the
			// protocol tells a colliding node to.
			d, err := didkey.NodeDID(nd.key, didkey.FormFallback)
			if err != nil {
				return err
			}
			nd.did = d.String()
		case status == http.StatusTooManyRequests:
			return fmt.Errorf("registering a node: %s: the registry limits new node keys per client address; start it with a larger --register-address-limit, or run bench without --url", code)
		default:
			return fmt.Errorf("registering a node: %s", code)
		}
	}
}

// heartbeat prepares signed heartbeats for n nodes in rounds: every round gives every node a
// heartbeat with a ts one second later than its last, because the registry answers a ts it
// has already seen without writing anything (docs/protocol.md §10.3), and a bench that
// replayed one heartbeat per node would measure that cheaper path. Client i owns nodes i,
// i+C, i+2C, ..., so one node's heartbeats leave in ts order.
func (r *benchRun) heartbeat(n int) (func(w *worker) bool, error) {
	nodes, err := r.registerNodes(n)
	if err != nil {
		return nil, err
	}
	// Every ts must stay within the registry's 300 s window: the first round is signed a
	// little in the past and the rounds never run ahead of the window.
	nextTS := time.Now().Unix() - benchHeartbeatLead
	var rounds [][][]byte
	prepare := func(k int) error {
		ahead := time.Now().Unix() + benchHeartbeatAhead - nextTS
		count := int(max(min(int64((k+n-1)/n), ahead), 1))
		rounds = make([][][]byte, count)
		for round := range rounds {
			ts := nextTS + int64(round)
			reqs := make([][]byte, n)
			err := parallel(r.ctx, n, runtime.NumCPU(), func(_, i int) error {
				nd := nodes[i]
				sig, err := canonical.Sign(nd.priv, r.b.cfg.prefix, canonical.Heartbeat{DID: nd.did, TS: ts})
				if err != nil {
					return err
				}
				pub := nd.key.Hex()
				body, err := json.Marshal(api.HeartbeatRequest{DID: nd.did, TS: ts, Signature: sig, PublicKey: &pub})
				if err != nil {
					return err
				}
				reqs[i] = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/api/v1/heartbeat"), "", body)
				return nil
			})
			if err != nil {
				return err
			}
			rounds[round] = reqs
		}
		nextTS += int64(count)
		for _, w := range r.workers {
			w.next, w.round = 0, 0
		}
		return nil
	}
	c := len(r.workers)
	send := func(w *worker) bool {
		i := w.id + w.next*c
		if i >= n {
			w.next, w.round, i = 0, w.round+1, w.id
		}
		if w.round >= len(rounds) || i >= n {
			return false
		}
		w.next++
		if w.send(rounds[w.round][i], &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}
	err = r.calibrate(8, n*(benchHeartbeatLead+benchHeartbeatAhead), prepare, send, "signed %s heartbeats in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// benchOperator is an operator identity made for the run.
type benchOperator struct {
	device ed25519.PrivateKey
	cred   authn.DeviceCredential
	credJS []byte
}

func newBenchOperator(prefix string) (benchOperator, error) {
	_, root, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchOperator{}, err
	}
	devPub, dev, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return benchOperator{}, err
	}
	dc, err := client.IssueDeviceCredential(root, devPub, client.CredentialOptions{Prefix: prefix})
	if err != nil {
		return benchOperator{}, err
	}
	js, err := json.Marshal(dc)
	if err != nil {
		return benchOperator{}, err
	}
	return benchOperator{device: dev, cred: dc, credJS: js}, nil
}

// preparedLogin is one device-login: the challenge and the signature over it. The rest of
// the body is the same for every login and is assembled into the client's buffer.
type preparedLogin struct {
	challenge, signature string
}

// login prepares device-logins, each on its own challenge.
func (r *benchRun) login() (func(w *worker) bool, error) {
	op, err := newBenchOperator(r.b.cfg.prefix)
	if err != nil {
		return nil, err
	}
	issued := canonical.FormatTime(time.Now().UTC())
	path := r.t.endpoint("/v1/auth/device-login")
	head := []byte(`{"device_credential":` + string(op.credJS) + `,"challenge":"`)
	mid := []byte(`","issued_at":"` + issued + `","signature":"`)
	tail := []byte(`"}`)
	prepare := func(k int) ([]preparedLogin, error) {
		chs, err := r.challenges(k)
		if err != nil {
			return nil, err
		}
		out := make([]preparedLogin, k)
		err = parallel(r.ctx, k, runtime.NumCPU(), func(_, i int) error {
			sig, err := canonical.Sign(op.device, r.b.cfg.prefix, canonical.Login{
				OperatorDID: op.cred.OperatorDID, DevicePublicKey: op.cred.DevicePublicKey, Challenge: chs[i], IssuedAt: issued,
			})
			out[i] = preparedLogin{challenge: chs[i], signature: sig}
			return err
		})
		return out, err
	}
	var logins []preparedLogin
	var next atomic.Int64
	send := func(w *worker) bool {
		i := int(next.Add(1) - 1)
		if i >= len(logins) {
			return false
		}
		l := logins[i]
		n := len(head) + len(l.challenge) + len(mid) + len(l.signature) + len(tail)
		w.buf = appendHead(w.buf[:0], "POST", r.t.host, path, "", n)
		w.buf = append(w.buf, head...)
		w.buf = append(w.buf, l.challenge...)
		w.buf = append(w.buf, mid...)
		w.buf = append(w.buf, l.signature...)
		w.buf = append(w.buf, tail...)
		if w.send(w.buf, &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}
	err = r.calibrate(8, benchMaxLogins, func(k int) error {
		logins, err = prepare(k)
		next.Store(0)
		return err
	}, send, "fetched %s challenges and signed a device-login for each in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// challenges fetches k login challenges over the run's connections.
func (r *benchRun) challenges(k int) ([]string, error) {
	req := appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/auth/challenge"), "", nil)
	out := make([]string, k)
	ws, done, err := r.setupWorkers()
	if err != nil {
		return nil, err
	}
	defer done()
	err = parallel(r.ctx, k, len(ws), func(g, i int) error {
		w := ws[g]
		status, err := w.conn.roundTrip(req, time.Now())
		if err != nil {
			return fmt.Errorf("fetching a challenge: %w", err)
		}
		ch, ok := jsonStringField(w.conn.body, "challenge")
		if status != http.StatusOK || !ok {
			return fmt.Errorf("fetching a challenge: %s", answerCode(status, w.conn.body))
		}
		out[i] = string(ch)
		return nil
	})
	return out, err
}

// calibrate sizes what a scenario prepares for its window, then prepares it. It prepares a
// batch (perClient per client), runs it untimed, and repeats with a batch sized to take
// calibrationTime at the rate just seen, until a batch after the first takes that long: a
// cold registry is slower than a warm one, and the window is sized from the warm rate. It
// then prepares the rate over the duration, with a margin, within the request budget and
// limit, and reports it with what (a format taking the count and the seconds it took). The
// batches also warm the registry up.
func (r *benchRun) calibrate(perClient, limit int, prepare func(k int) error, op func(w *worker) bool, what string) error {
	const calibrationTime = 300 * time.Millisecond
	budget := min(r.b.cfg.requests, int64(limit))
	batch := min(max(int64(perClient*len(r.workers)), 32), budget)
	var rate float64
	var ran int64
	for round := 0; ; round++ {
		if err := prepare(int(batch)); err != nil {
			return err
		}
		ok, elapsed, err := r.untimed(op)
		if err != nil {
			return fmt.Errorf("calibration: %w", err)
		}
		rate, ran = float64(ok)/elapsed.Seconds(), ok
		// The first round is taken cold; a later one decides.
		if (round > 0 && elapsed >= calibrationTime) || batch >= budget || round == 3 {
			break
		}
		next := int64(rate * calibrationTime.Seconds() * 1.2)
		batch = min(max(next, 2*batch), budget)
	}
	need := int64(rate*r.b.cfg.duration.Seconds()*benchMargin) + int64(16*len(r.workers))
	k := int(min(need, budget))
	r.note("calibrated at %s ops/s on %s operations", group(rate), group(float64(ran)))
	start := time.Now()
	if err := prepare(k); err != nil {
		return err
	}
	r.note(what, group(float64(k)), time.Since(start).Seconds())
	r.res.Prepared = k
	return nil
}

// untimed runs op on every client until it reports nothing left, and fails if any
// operation did.
func (r *benchRun) untimed(op func(w *worker) bool) (int64, time.Duration, error) {
	for _, w := range r.workers {
		w.stats = newWorkerStats(len(journeySteps))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r.ctx.Err() == nil && op(w) {
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	total := newWorkerStats(len(journeySteps))
	for _, w := range r.workers {
		total.add(&w.stats)
	}
	if err := r.ctx.Err(); err != nil {
		return 0, 0, err
	}
	if len(total.errs) > 0 {
		var failed int64
		for _, n := range total.errs {
			failed += n
		}
		return 0, 0, fmt.Errorf("%d operations failed (%s)", failed, errorText(total.errs))
	}
	return total.ok, elapsed, nil
}

// listing registers n nodes and lists them with GET path.
func (r *benchRun) listing(n int, path string) (func(w *worker) bool, error) {
	if _, err := r.registerNodes(n); err != nil {
		return nil, err
	}
	listed, err := r.count(path)
	if err != nil {
		return nil, err
	}
	r.res.Listed = &listed
	r.note("GET %s lists %s nodes", path, group(float64(listed)))
	r.res.Prepared = 1
	req := appendRequest(nil, "GET", r.t.host, r.t.endpoint(path), "", nil)
	return func(w *worker) bool {
		if w.send(req, &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}, nil
}

// count reads one listing and counts its nodes, so the figures say how big the answers
// were (an existing registry may hold more than bench registered). It reads the answer as
// the timed requests do, keeping only its head, so a listing of any size is never held
// whole by the generator.
func (r *benchRun) count(path string) (int, error) { return r.countAt(r.t.addr, path) }

// countAt is count from the daemon at addr.
func (r *benchRun) countAt(addr, path string) (int, error) {
	c, err := dialBench(addr)
	if err != nil {
		return 0, fmt.Errorf("connecting to %s: %w", r.t.base, err)
	}
	defer c.close()
	c.countLines = path == "/peers"
	req := appendRequest(nil, "GET", r.t.host, r.t.endpoint(path), "", nil)
	status, err := c.roundTrip(req, time.Now())
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", path, answerCode(status, c.body))
	}
	if c.countLines {
		return int(c.lines), nil
	}
	n, ok := jsonIntField(c.body, "count")
	if !ok {
		return 0, fmt.Errorf("GET %s: no count at the head of the answer", path)
	}
	return int(n), nil
}

// preparedJourney is one binding journey, signed but for resolve, which needs the short
// code initiate returns.
type preparedJourney struct {
	initiate, authorize, pending, accept []byte
}

// binder prepares binding journeys, each with a new node key, for one logged-in operator.
type binder struct {
	r     *benchRun
	token string // the operator's bearer token
	op    benchOperator
	runID string
	seq   atomic.Int64
}

func (r *benchRun) newBinder() (*binder, error) {
	op, err := newBenchOperator(r.b.cfg.prefix)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(r.t.base, client.WithPrefix(r.b.cfg.prefix))
	if err != nil {
		return nil, err
	}
	session, err := cl.Login(r.ctx, op.device, op.cred)
	if err != nil {
		return nil, fmt.Errorf("logging the operator in: %w", err)
	}
	var idBytes [6]byte
	if _, err := rand.Read(idBytes[:]); err != nil {
		return nil, err
	}
	return &binder{r: r, token: session.Token, op: op, runID: hex.EncodeToString(idBytes[:])}, nil
}

// build signs one journey created at now. The acceptance is signed too: its
// authorization_digest is the SHA-256 of the authorization bench itself signed.
func (bd *binder) build(now time.Time) (preparedJourney, error) {
	var pj preparedJourney
	r, op, prefix := bd.r, bd.op, bd.r.b.cfg.prefix
	single, grantSingle, grantDaily := 10.0, 5.0, 50.0
	tasks := []string{"inference"}
	nd, err := newBenchNode()
	if err != nil {
		return pj, err
	}
	id := fmt.Sprintf("bench-%s-%d", bd.runID, bd.seq.Add(1))
	at := canonical.FormatTime(now)
	ini := binding.InitiateRequest{BindingSession: canonical.BindingSession{
		BindingSessionID: id, NodeDID: nd.did, NodePublicKey: nd.key.Base58(),
		DeviceSummary: "bench", OS: "linux", Region: "bench",
		RequestedTaskTypes: tasks, RequestedSingleLimit: &single,
		Nonce: "nonce-" + id, CreatedAt: at, ExpiresAt: canonical.FormatTime(now.Add(client.MaxSessionTTL)),
	}}
	if ini.NodeSignature, err = canonical.Sign(nd.priv, prefix, ini.BindingSession); err != nil {
		return pj, err
	}
	az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
		BindingSessionID: id, NodeDID: nd.did, OperatorDID: op.cred.OperatorDID,
		TaskTypes: tasks, SingleLimit: &grantSingle, DailyLimit: &grantDaily,
		RevocationID: "rev-" + id, IssuedAt: at, ExpiresAt: canonical.FormatTime(now.Add(time.Hour)),
	}}
	if az.Signature, err = canonical.Sign(op.device, prefix, az.Authorization); err != nil {
		return pj, err
	}
	poll := api.PendingRequest{NodeDID: nd.did, NodePublicKey: nd.key.Base58(), TS: now.Unix()}
	if poll.Signature, err = canonical.Sign(nd.priv, prefix, canonical.Poll{NodeDID: nd.did, TS: poll.TS}); err != nil {
		return pj, err
	}
	digest, err := az.Digest(prefix)
	if err != nil {
		return pj, err
	}
	acc := binding.Acceptance{Acceptance: canonical.Acceptance{
		BindingSessionID: id, NodeDID: nd.did, OperatorDID: op.cred.OperatorDID,
		AuthorizationDigest: digest, Accepted: true, IssuedAt: at,
	}}
	if acc.Signature, err = canonical.Sign(nd.priv, prefix, acc.Acceptance); err != nil {
		return pj, err
	}
	bodies := make([][]byte, 4)
	for i, v := range []any{ini, api.AuthorizeRequest{BindingSessionID: id, DeviceCredential: op.cred, AuthorizationCredential: az}, poll, api.AcceptanceRequest{Acceptance: acc}} {
		if bodies[i], err = json.Marshal(v); err != nil {
			return pj, err
		}
	}
	pj.initiate = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/bindings/initiate"), "", bodies[0])
	pj.authorize = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/bindings/authorize"), bd.token, bodies[1])
	pj.pending = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/node/bindings/pending"), "", bodies[2])
	pj.accept = appendRequest(nil, "POST", r.t.host, r.t.endpoint("/v1/node/bindings/"+url.PathEscape(id)+"/accept"), "", bodies[3])
	return pj, nil
}

// prepare signs k journeys, all created now.
func (bd *binder) prepare(k int) ([]preparedJourney, error) {
	now := time.Now().UTC().Truncate(time.Second)
	out := make([]preparedJourney, k)
	err := parallel(bd.r.ctx, k, runtime.NumCPU(), func(_, i int) error {
		var err error
		out[i], err = bd.build(now)
		return err
	})
	return out, err
}

// resolve builds into w.buf the operator's resolve of the short code initiate returned.
func (bd *binder) resolve(w *worker, code []byte) []byte {
	w.buf = appendHead(w.buf[:0], "POST", bd.r.t.host, bd.r.t.endpoint("/v1/bindings/resolve"), bd.token, len(`{"short_code":""}`)+len(code))
	w.buf = append(w.buf, `{"short_code":"`...)
	w.buf = append(w.buf, code...)
	w.buf = append(w.buf, `"}`...)
	return w.buf
}

// journey prepares whole binding journeys and sends each as a node and its operator would:
// initiate, resolve, authorize, pending, accept.
func (r *benchRun) journey() (func(w *worker) bool, error) {
	bd, err := r.newBinder()
	if err != nil {
		return nil, err
	}
	var journeys []preparedJourney
	var next atomic.Int64
	send := func(w *worker) bool {
		i := int(next.Add(1) - 1)
		if i >= len(journeys) {
			return false
		}
		pj := &journeys[i]
		steps := w.stats.steps
		start := time.Now()
		if !w.send(pj.initiate, &steps[0]) {
			return true
		}
		code, ok := jsonStringField(w.conn.body, "short_code")
		if !ok {
			w.stats.errs["200 initiate answer without short_code"]++
			return true
		}
		if !w.send(bd.resolve(w, code), &steps[1]) || !w.send(pj.authorize, &steps[2]) ||
			!w.send(pj.pending, &steps[3]) || !w.send(pj.accept, &steps[4]) {
			return true
		}
		w.stats.hist.record(time.Since(start))
		w.stats.ok++
		return true
	}
	err = r.calibrate(4, benchMaxJourneys, func(k int) error {
		journeys, err = bd.prepare(k)
		next.Store(0)
		return err
	}, send, "signed %s journeys (a node key, initiate, authorization, poll and acceptance each) in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// accept prepares binding sessions up to the node's acceptance (initiate, resolve and
// authorize sent in setup) and sends only the signed acceptances, each of which verifies the
// whole four-signature chain.
func (r *benchRun) accept() (func(w *worker) bool, error) {
	bd, err := r.newBinder()
	if err != nil {
		return nil, err
	}
	prepare := func(k int) ([][]byte, error) {
		journeys, err := bd.prepare(k)
		if err != nil {
			return nil, err
		}
		ws, done, err := r.setupWorkers()
		if err != nil {
			return nil, err
		}
		defer done()
		accepts := make([][]byte, k)
		err = parallel(r.ctx, k, len(ws), func(g, i int) error {
			if err := bd.authorize(ws[g], &journeys[i]); err != nil {
				return err
			}
			accepts[i] = journeys[i].accept
			return nil
		})
		return accepts, err
	}
	var accepts [][]byte
	var next atomic.Int64
	send := func(w *worker) bool {
		i := int(next.Add(1) - 1)
		if i >= len(accepts) {
			return false
		}
		if w.send(accepts[i], &w.stats.hist) {
			w.stats.ok++
		}
		return true
	}
	err = r.calibrate(8, benchMaxAccepts, func(k int) error {
		accepts, err = prepare(k)
		next.Store(0)
		return err
	}, send, "signed %s journeys and carried each session to the node's acceptance (initiate, resolve, authorize) in %.1fs")
	if err != nil {
		return nil, err
	}
	return send, nil
}

// authorize sends pj's initiate, resolve and authorize over w, leaving its session waiting
// for the node's acceptance.
func (bd *binder) authorize(w *worker, pj *preparedJourney) error {
	step := func(name string, req []byte) error {
		status, err := w.conn.roundTrip(req, time.Now())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if status < 200 || status > 299 {
			return fmt.Errorf("%s: %s", name, answerCode(status, w.conn.body))
		}
		return nil
	}
	if err := step("initiate", pj.initiate); err != nil {
		return err
	}
	code, ok := jsonStringField(w.conn.body, "short_code")
	if !ok {
		return errors.New("initiate: the answer has no short_code")
	}
	if err := step("resolve", bd.resolve(w, code)); err != nil {
		return err
	}
	return step("authorize", pj.authorize)
}
