package daemon

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// crashStepTimeout bounds one step of the crash harness (a start, a request, an exit);
// each normally takes well under a second.
const crashStepTimeout = svrpdtest.StepTimeout

// TestCrashSafety kills the daemon with SIGKILL at a random moment while four clients
// register nodes, log in and drive binding handshakes, restarts it on the same data
// directory, and checks that every write it acknowledged with a 2xx survived and that no
// session was left VERIFYING. It repeats for SVRPD_CRASH_ROUNDS rounds (3 by default, so a
// plain go test stays quick), on one data directory, so each restart checks the writes of
// every earlier round too. A longer run, for example:
//
//	SVRPD_CRASH_ROUNDS=200 go test ./internal/daemon -run TestCrashSafety -v -timeout 60m
//
// The moments of the kills come from a seed, printed when the test fails; SVRPD_CRASH_SEED
// replays them. The traffic around a kill still depends on the machine's timing, so a replay
// repeats the schedule, not every byte.
func TestCrashSafety(t *testing.T) {
	rounds := 3
	if v := os.Getenv("SVRPD_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SVRPD_CRASH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	rng := crashRand(t)
	data := t.TempDir()
	log := &svrpdtest.Log{}
	ledger := newCrashLedger()
	d := crashStart(t, data, log)
	for round := 1; round <= rounds; round++ {
		c := newCrashClient(d.URL)
		// The kill lands anywhere in the traffic: between requests, inside a commit, in the
		// middle of an answer.
		delay := time.Duration(100+rng.IntN(1400)) * time.Millisecond
		before := killRound(t, d, ledger, round, func() { time.Sleep(delay) }, func(w int, stop <-chan struct{}) error {
			return crashWorker(c, ledger, fmt.Sprintf("r%d-w%d", round, w), stop)
		})
		d = crashStart(t, data, log)
		ledger.verify(t, newCrashClient(d.URL))
		t.Logf("round %d: SIGKILL after %v with %d writes acknowledged so far; after restart every one is there, no session VERIFYING", round, delay, before)
		if t.Failed() {
			break
		}
	}
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("svrpd exited %d on SIGTERM", code)
	}
	// The daemon logged every request at debug level through all of this; no secret the
	// clients saw may be in its log.
	all := log.String()
	ledger.mu.Lock()
	for v, what := range ledger.secrets {
		if v != "" && strings.Contains(all, v) {
			t.Errorf("the daemon's log contains a %s", what)
		}
	}
	n := len(ledger.secrets)
	ledger.mu.Unlock()
	if !strings.Contains(all, `msg=request`) {
		t.Errorf("the daemon logged no request at debug level")
	}
	t.Logf("%d rounds; %d secrets absent from %d log lines", rounds, n, strings.Count(all, "\n")+1)
}

// killRound runs one round of four crash workers against d, work being one worker's traffic
// until stop is closed. When wait returns, the daemon is killed with SIGKILL; a worker that
// failed before the kill fails the test. It returns how many writes had been acknowledged by
// the kill.
func killRound(t *testing.T, d *svrpdtest.Daemon, ledger *crashLedger, round int, wait func(), work func(w int, stop <-chan struct{}) error) int {
	t.Helper()
	stop := make(chan struct{})
	var killed atomic.Bool
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every request fails once the process is gone; only a failure while it was
			// still up is the server's fault.
			if err := work(w, stop); err != nil && !killed.Load() {
				errs[w] = err
			}
		}()
	}
	wait()
	killed.Store(true)
	before := ledger.acknowledged()
	d.Signal(t, syscall.SIGKILL)
	close(stop)
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("round %d worker %d failed before the kill: %v", round, w, err)
		}
	}
	return before
}

// crashRand is the source of a crash test's delays, seeded by SVRPD_CRASH_SEED when set and
// afresh otherwise; a failed test prints its seed.
func crashRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := rand.Uint64()
	if v := os.Getenv("SVRPD_CRASH_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SVRPD_CRASH_SEED=%q: want an unsigned decimal number", v)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("delays from SVRPD_CRASH_SEED=%d; set it to replay them", seed)
		}
	})
	return rand.New(rand.NewPCG(seed, seed))
}

func (l *crashLedger) acknowledged() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// crashStart runs svrpd serve on a free loopback port over data (a directory or a PostgreSQL
// URL), logging at debug level into log, with any extra flags, and returns once it serves.
func crashStart(t *testing.T, data string, log *svrpdtest.Log, extra ...string) *svrpdtest.Daemon {
	t.Helper()
	where := []string{"--data", data}
	if strings.HasPrefix(data, "postgres://") {
		where = []string{"--postgres", data}
	}
	args := append(where, "--log-level", "debug", "--register-address-limit", "1000000",
		"--initiate-address-limit", "1000000", "--login-address-limit", "1000000",
		"--max-nodes-per-client", "1000000", "--max-nodes-per-block", "1000000", "--max-nodes-per-network", "1000000")
	return svrpdtest.Start(t, log, append(args, extra...)...)
}

// crashClient speaks the registry's HTTP API to one daemon, with raw requests.
type crashClient struct {
	url  string
	http *http.Client
}

func newCrashClient(url string) *crashClient {
	return &crashClient{url: url, http: &http.Client{Timeout: crashStepTimeout}}
}

// call sends one request; out, when not nil, receives a 200 answer. It returns the status
// and, for an error answer, its code; err is a transport or decoding failure.
func (c *crashClient) call(method, path string, body any, token string, out any) (int, string, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, r)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", err
	}
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorBody
		_ = json.Unmarshal(raw, &e)
		return resp.StatusCode, e.Code, nil
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, "", fmt.Errorf("decoding %s: %w", raw, err)
		}
	}
	return resp.StatusCode, "", nil
}

// crashSign signs a message under the default prefix; the messages are built here from
// valid fields, so an error is a bug in the test.
func crashSign(priv ed25519.PrivateKey, m canonical.Message) string {
	sig, err := canonical.Sign(priv, canonical.DefaultPrefix, m)
	if err != nil {
		panic(err)
	}
	return sig
}

func crashKey() (ed25519.PrivateKey, didkey.PublicKey) {
	priv := testkit.RandomKey()
	k, _ := didkey.KeyFromEd25519(priv.Public().(ed25519.PublicKey))
	return priv, k
}

// crashNode is a node identity with a fresh random key.
type crashNode struct {
	priv ed25519.PrivateKey
	key  didkey.PublicKey
	did  string
}

func newCrashNode() crashNode {
	priv, k := crashKey()
	d, _ := didkey.NodeDID(k, didkey.FormFull)
	return crashNode{priv: priv, key: k, did: d.String()}
}

// crashOperator is an operator identity: root and device keys and the credential.
type crashOperator struct {
	root, device ed25519.PrivateKey
	did          string
	cred         authn.DeviceCredential
}

func newCrashOperator(now time.Time) crashOperator {
	root, _ := crashKey()
	device, _ := crashKey()
	cred, err := client.IssueDeviceCredential(root, device.Public().(ed25519.PublicKey), client.CredentialOptions{
		IssuedAt: now.Add(-time.Hour), Validity: 25 * time.Hour, CredentialID: "cred-crash", DeviceID: "crash-device", RevocationID: "rev-crash",
	})
	if err != nil {
		panic(err)
	}
	return crashOperator{root: root, device: device, did: cred.OperatorDID, cred: cred}
}

// stateRank orders the states a session passes through on the way to ACTIVE, so that "at
// least as far as acknowledged" is a comparison.
var stateRank = map[string]int{
	"INITIATED": 1, "PENDING_OPERATOR": 2, "PENDING_NODE_ACCEPTANCE": 3, "ACTIVE": 4,
}

// crashSession is what was acknowledged about one binding session.
type crashSession struct {
	state     string // the furthest state a 2xx answer confirmed; "" if none
	expiresAt time.Time
	nodeDID   string
	operator  string
}

type crashNodeAck struct {
	endpoint   string
	registered string // the latest last_seen a registration's 2xx reported: durable as is
	beat       string // the latest last_seen a heartbeat's 2xx reported
}

// heartbeatDurability is how far a heartbeat's last_seen may lag after a crash: svrpd keeps
// heartbeat times in memory and makes them durable every registry.DefaultFlushEvery, and a crash
// may fall just before a flush or during one.
const heartbeatDurability = registry.DefaultFlushEvery + 2*time.Second

type crashTokenAck struct {
	operator string
	at       time.Time
}

// crashLedger records every write the server acknowledged with a 2xx, and every secret
// that crossed the wire, across all rounds.
type crashLedger struct {
	mu       sync.Mutex
	nodes    map[string]crashNodeAck  // hex key
	tokens   map[string]crashTokenAck // bearer token
	sessions map[string]*crashSession // every id sent to initiate, acknowledged or not
	secrets  map[string]string        // value → what it is
	acks     int
}

func newCrashLedger() *crashLedger {
	return &crashLedger{
		nodes: map[string]crashNodeAck{}, tokens: map[string]crashTokenAck{},
		sessions: map[string]*crashSession{}, secrets: map[string]string{},
	}
}

func (l *crashLedger) secret(what, v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.secrets[v] = what
}

func (l *crashLedger) ackNode(k didkey.PublicKey, endpoint, registered string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.nodes[k.Hex()]
	a.endpoint = endpoint
	a.registered = max(a.registered, registered)
	l.nodes[k.Hex()] = a
	l.acks++
}

func (l *crashLedger) ackBeat(k didkey.PublicKey, lastSeen string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.nodes[k.Hex()]
	a.beat = max(a.beat, lastSeen)
	l.nodes[k.Hex()] = a
	l.acks++
}

func (l *crashLedger) ackToken(token, operator string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens[token] = crashTokenAck{operator: operator, at: time.Now()}
	l.acks++
}

func (l *crashLedger) attempt(id, nodeDID string, expiresAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions[id] = &crashSession{expiresAt: expiresAt, nodeDID: nodeDID}
}

func (l *crashLedger) ackState(id, state, operator string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[id]
	s.state = state
	if operator != "" {
		s.operator = operator
	}
	l.acks++
}

// crashWorker drives one operator's traffic: for ever new nodes that register, heartbeat
// and go through the binding handshake (one in five is cancelled by the operator instead),
// until a request fails. It returns the first failure.
func crashWorker(c *crashClient, l *crashLedger, prefix string, stop <-chan struct{}) error {
	op := newCrashOperator(time.Now())
	var ch api.ChallengeResult
	if _, _, err := mustOK(c.call("POST", "/v1/auth/challenge", nil, "", &ch)); err != nil {
		return err
	}
	l.secret("challenge", ch.Challenge)
	issued := canonical.FormatTime(time.Now())
	login := authn.Login{DeviceCredential: op.cred, Challenge: ch.Challenge, IssuedAt: issued,
		Signature: crashSign(op.device, canonical.Login{OperatorDID: op.did, DevicePublicKey: op.cred.DevicePublicKey, Challenge: ch.Challenge, IssuedAt: issued})}
	var lr api.LoginResult
	if _, _, err := mustOK(c.call("POST", "/v1/auth/device-login", login, "", &lr)); err != nil {
		return err
	}
	token := lr.SessionToken
	l.secret("bearer token", token)
	l.ackToken(token, op.did)

	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		n := newCrashNode()
		l.secret("node seed", hex.EncodeToString(n.priv.Seed()))
		endpoint := fmt.Sprintf("203.0.113.%d:%d", i%250+1, 7000+i%1000)
		reg := api.RegisterRequest{DID: n.did, PublicKey: n.key.Hex(), Endpoint: endpoint, Capabilities: []string{"inference"}}
		sig := crashSign(n.priv, canonical.Register{DID: n.did, PublicKey: n.key.Base58(), Endpoint: endpoint, Capabilities: reg.Capabilities})
		reg.Signature = &sig
		var rr api.RegisterResult
		if _, _, err := mustOK(c.call("POST", "/api/v1/register", reg, "", &rr)); err != nil {
			return err
		}
		l.ackNode(n.key, endpoint, rr.Data.LastSeen)

		ts := time.Now().Unix()
		hb := api.HeartbeatRequest{DID: n.did, TS: ts, Signature: crashSign(n.priv, canonical.Heartbeat{DID: n.did, TS: ts})}
		var hr api.HeartbeatResult
		if _, _, err := mustOK(c.call("POST", "/api/v1/heartbeat", hb, "", &hr)); err != nil {
			return err
		}
		l.ackBeat(n.key, hr.LastSeen)

		id := fmt.Sprintf("%s-%d", prefix, i)
		now := time.Now().UTC()
		ini := binding.InitiateRequest{BindingSession: canonical.BindingSession{
			BindingSessionID: id, NodeDID: n.did, NodePublicKey: n.key.Base58(), DeviceSummary: "crash box", OS: "linux",
			RequestedTaskTypes: []string{"inference"}, Nonce: "nonce-" + id,
			CreatedAt: canonical.FormatTime(now), ExpiresAt: canonical.FormatTime(now.Add(10 * time.Minute)),
		}}
		ini.NodeSignature = crashSign(n.priv, ini.BindingSession)
		l.attempt(id, n.did, now.Add(10*time.Minute))
		var ir api.InitiateResult
		if _, _, err := mustOK(c.call("POST", "/v1/bindings/initiate", ini, "", &ir)); err != nil {
			return err
		}
		l.secret("short code", ir.ShortCode)
		l.secret("binding token", ir.BindingToken)
		l.ackState(id, "INITIATED", "")

		var view api.ResolveView
		if _, _, err := mustOK(c.call("POST", "/v1/bindings/resolve", api.ResolveRequest{ShortCode: ir.ShortCode}, token, &view)); err != nil {
			return err
		}
		l.ackState(id, "PENDING_OPERATOR", op.did)

		if i%5 == 4 {
			if _, _, err := mustOK(c.call("POST", "/v1/bindings/"+id+"/cancel", nil, token, nil)); err != nil {
				return err
			}
			l.ackState(id, "CANCELLED", "")
			continue
		}

		iss := time.Now().UTC()
		az := binding.AuthorizationCredential{Authorization: canonical.Authorization{
			BindingSessionID: id, NodeDID: n.did, OperatorDID: op.did, TaskTypes: []string{"inference"},
			RevocationID: "authz-" + id, IssuedAt: canonical.FormatTime(iss), ExpiresAt: canonical.FormatTime(iss.Add(time.Hour)),
		}}
		az.Signature = crashSign(op.device, az.Authorization)
		authz := api.AuthorizeRequest{BindingSessionID: id, DeviceCredential: op.cred, AuthorizationCredential: az}
		if _, _, err := mustOK(c.call("POST", "/v1/bindings/authorize", authz, token, nil)); err != nil {
			return err
		}
		l.ackState(id, "PENDING_NODE_ACCEPTANCE", "")

		ts = time.Now().Unix()
		poll := api.PendingRequest{NodeDID: n.did, NodePublicKey: n.key.Base58(), TS: ts, Signature: crashSign(n.priv, canonical.Poll{NodeDID: n.did, TS: ts})}
		var pend api.PendingResult
		if _, _, err := mustOK(c.call("POST", "/v1/node/bindings/pending", poll, "", &pend)); err != nil {
			return err
		}
		if len(pend.Pending) != 1 || pend.Pending[0].BindingSessionID != id {
			return fmt.Errorf("pending for %s: %+v", id, pend)
		}
		digest, err := pend.Pending[0].AuthorizationCredential.Authorization.Digest(canonical.DefaultPrefix)
		if err != nil {
			return err
		}
		acc := binding.Acceptance{Acceptance: canonical.Acceptance{
			BindingSessionID: id, NodeDID: n.did, OperatorDID: op.did, AuthorizationDigest: digest,
			Accepted: true, IssuedAt: canonical.FormatTime(time.Now()),
		}}
		acc.Signature = crashSign(n.priv, acc.Acceptance)
		if _, _, err := mustOK(c.call("POST", "/v1/node/bindings/"+id+"/accept", api.AcceptanceRequest{Acceptance: acc}, "", nil)); err != nil {
			return err
		}
		l.ackState(id, "ACTIVE", "")
	}
}

// mustOK turns an answer other than 200 into an error.
func mustOK(status int, code string, err error) (int, string, error) {
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("answer %d %s", status, code)
	}
	return status, code, err
}

// verify checks, against a daemon restarted on the same data, that every acknowledged
// write is there: nodes with their endpoint and a last_seen no older than a registration
// acknowledged (and than a heartbeat acknowledged, less heartbeatDurability),
// bearer tokens that still open the operator's views, sessions at least as far as
// acknowledged (never VERIFYING, and no session the client never got an answer for in a
// state it could not have reached), and every acknowledged binding listed by its operator.
func (l *crashLedger) verify(t *testing.T, c *crashClient) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var list struct {
		Nodes []api.NodeView `json:"nodes"`
	}
	if _, _, err := mustOK(c.call("GET", "/nodes", nil, "", &list)); err != nil {
		t.Fatalf("GET /nodes: %v", err)
	}
	listed := map[string]api.NodeView{}
	for _, v := range list.Nodes {
		listed[v.PublicKey] = v
	}
	for k, a := range l.nodes {
		v, ok := listed[k]
		switch {
		case !ok:
			t.Errorf("acknowledged node %s is gone", k)
		case v.Endpoint != a.endpoint || !v.SignatureVerified:
			t.Errorf("node %s: endpoint %s verified %v, acknowledged %s", k, v.Endpoint, v.SignatureVerified, a.endpoint)
		case v.LastSeen < a.registered:
			t.Errorf("node %s: last_seen %s is older than the acknowledged registration at %s", k, v.LastSeen, a.registered)
		case a.beat != "" && v.LastSeen < crashLag(a.beat):
			t.Errorf("node %s: last_seen %s lags the acknowledged heartbeat at %s by more than %v", k, v.LastSeen, a.beat, heartbeatDurability)
		}
	}
	tokenOf := map[string]string{}
	for tok, a := range l.tokens {
		status, code, err := c.call("GET", "/v1/operator/me/credits", nil, tok, nil)
		if err != nil {
			t.Fatalf("credits: %v", err)
		}
		if status != http.StatusOK && !(code == "SESSION_EXPIRED" && time.Since(a.at) > authn.SessionTTL-time.Minute) {
			t.Errorf("acknowledged bearer token of %s: %d %s", a.operator, status, code)
		}
		tokenOf[a.operator] = tok
	}
	bound := map[string][]string{}
	for id, s := range l.sessions {
		var st api.Status
		status, code, err := c.call("GET", "/v1/bindings/"+id+"/status", nil, "", &st)
		if err != nil {
			t.Fatalf("status %s: %v", id, err)
		}
		if status == http.StatusNotFound && s.state == "" {
			continue // never acknowledged, and never committed
		}
		if status != http.StatusOK {
			t.Errorf("session %s (acknowledged %q): %d %s", id, s.state, status, code)
			continue
		}
		expired := st.State == "EXPIRED" && !time.Now().Before(s.expiresAt)
		switch {
		case st.State == "VERIFYING":
			t.Errorf("session %s is stuck in VERIFYING", id)
		case s.state == "CANCELLED" && st.State != "CANCELLED":
			t.Errorf("session %s: acknowledged CANCELLED, now %s", id, st.State)
		case st.State == "CANCELLED" || expired:
		case stateRank[st.State] == 0:
			t.Errorf("session %s: unexpected state %s", id, st.State)
		case stateRank[st.State] < stateRank[s.state]:
			t.Errorf("session %s: state %s is behind the acknowledged %s", id, st.State, s.state)
		}
		if s.state == "ACTIVE" {
			bound[s.operator] = append(bound[s.operator], s.nodeDID)
		}
	}
	for op, nodes := range bound {
		tok, ok := tokenOf[op]
		if !ok {
			t.Errorf("no token for operator %s", op)
			continue
		}
		var mine api.OperatorNodes
		status, code, err := c.call("GET", "/v1/operator/me/nodes", nil, tok, &mine)
		if err != nil || status != http.StatusOK {
			if code == "SESSION_EXPIRED" {
				continue
			}
			t.Fatalf("operator nodes of %s: %d %s %v", op, status, code, err)
		}
		have := map[string]bool{}
		for _, b := range mine.Nodes {
			have[b.NodeDID] = true
		}
		for _, n := range nodes {
			if !have[n] {
				t.Errorf("operator %s no longer lists its acknowledged binding of %s", op, n)
			}
		}
	}
}

// crashLag is the oldest last_seen that still keeps a heartbeat acknowledged at beat.
func crashLag(beat string) string {
	t, err := time.Parse(time.RFC3339, beat)
	if err != nil {
		return beat
	}
	return t.Add(-heartbeatDurability).UTC().Format(time.RFC3339)
}
