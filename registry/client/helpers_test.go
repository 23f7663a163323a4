package client_test

import (
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// hook may answer a request in place of the registry; it returns false to pass it on. n is the
// 1-based count of requests to this path so far, this one included.
type hook func(n int, w http.ResponseWriter, r *http.Request) bool

// counting wraps a handler, counts requests per path and lets hooks answer some of them.
type counting struct {
	next http.Handler

	mu    sync.Mutex
	hits  map[string]int
	hooks map[string]hook
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.hits[r.URL.Path]++
	n, h, next := c.hits[r.URL.Path], c.hooks[r.URL.Path], c.next
	c.mu.Unlock()
	if h != nil && h(n, w, r) {
		return
	}
	next.ServeHTTP(w, r)
}

// on installs a hook for a path.
func (c *counting) on(path string, h hook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks[path] = h
}

// count returns the requests to a path so far.
func (c *counting) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits[path]
}

// total returns all requests so far.
func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.hits {
		n += v
	}
	return n
}

// world is a real registry over an in-memory store behind a counting handler, on a fake
// clock.
type world struct {
	t     *testing.T
	clock *testkit.Clock
	svc   *registry.Service
	reqs  *counting
	srv   *httptest.Server
}

func newWorld(t *testing.T) *world { return newWorldOn(t, store.NewMemory()) }

// newWorldOn is newWorld on the store st.
func newWorldOn(t *testing.T, st store.Store) *world {
	t.Helper()
	// The registry and the clients of one test share the clock.
	clock := testkit.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	w := &world{t: t, clock: clock, reqs: &counting{hits: map[string]int{}, hooks: map[string]hook{}}}
	w.restart(st)
	w.srv = httptest.NewServer(w.reqs)
	t.Cleanup(w.srv.Close)
	return w
}

// restart serves the world from a new registry on st, as a daemon started again on it.
func (w *world) restart(st store.Store) {
	w.t.Helper()
	svc, err := registry.New(registry.Config{Store: st, Clock: w.clock.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	w.reqs.mu.Lock()
	defer w.reqs.mu.Unlock()
	w.svc, w.reqs.next = svc, httpapi.New(svc)
}

// noWait is a retry policy with the default count whose waits are all zero, recording the
// ceilings it was asked for.
type noWait struct {
	mu       sync.Mutex
	ceilings []time.Duration
}

func (n *noWait) policy(retries int) client.RetryPolicy {
	return client.RetryPolicy{Retries: retries, Jitter: func(c time.Duration) time.Duration {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.ceilings = append(n.ceilings, c)
		return 0
	}}
}

func (n *noWait) seen() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]time.Duration(nil), n.ceilings...)
}

// client returns a client of the world on its clock, with retries that do not wait.
func (w *world) client(opts ...client.Option) *client.Client {
	w.t.Helper()
	base := []client.Option{client.WithClock(w.clock.Now), client.WithRetry((&noWait{}).policy(client.DefaultRetries))}
	c, err := client.New(w.srv.URL, append(base, opts...)...)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func (w *world) node(c *client.Client, label string) *client.Node {
	w.t.Helper()
	n, err := client.NewNode(c, testkit.LabelKey(w.t, label), didkey.FormShort)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// registered is the node of label, registered at endpoint with caps and region.
func (w *world) registered(c *client.Client, label, endpoint string, caps []string, region string) *client.Node {
	w.t.Helper()
	n := w.node(c, label)
	if _, err := n.Register(w.t.Context(), endpoint, caps, region); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// operator issues a credential at the world's time and logs in.
func (w *world) operator(c *client.Client, label string) *client.Operator {
	w.t.Helper()
	dev := testkit.LabelKey(w.t, label+"/device")
	cred, err := client.IssueDeviceCredential(testkit.LabelKey(w.t, label+"/root"), dev.Public().(ed25519.PublicKey),
		client.CredentialOptions{IssuedAt: w.clock.Now()})
	if err != nil {
		w.t.Fatal(err)
	}
	op, err := c.Login(w.t.Context(), dev, cred)
	if err != nil {
		w.t.Fatalf("login: %v", err)
	}
	return op
}

func ptr(v float64) *float64 { return &v }

// answer writes a JSON body with a status.
func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// swallow runs the real handler and throws its answer away, writing status instead: the
// registry acted, but the client never learns it.
func swallow(next http.Handler, status int) hook {
	return func(_ int, w http.ResponseWriter, r *http.Request) bool {
		next.ServeHTTP(httptest.NewRecorder(), r)
		answer(w, status, `{"code":"INTERNAL","error":"internal error"}`)
		return true
	}
}
