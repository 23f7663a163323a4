package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/client"
)

func TestRetriesTooManyRequestsThenSucceeds(t *testing.T) {
	w := newWorld(t)
	w.reqs.on("/health", func(n int, rw http.ResponseWriter, _ *http.Request) bool {
		if n <= 2 {
			answer(rw, http.StatusTooManyRequests, `{"code":"RATE_LIMITED","error":"slow down"}`)
			return true
		}
		return false
	})
	waits := &noWait{}
	c := w.client(client.WithRetry(waits.policy(client.DefaultRetries)))
	h, err := c.Health(t.Context())
	if err != nil {
		t.Fatalf("Health after two 429s: %v", err)
	}
	if h.Status != "ok" {
		t.Errorf("status = %q, want ok", h.Status)
	}
	if got := w.reqs.count("/health"); got != 3 {
		t.Errorf("requests = %d, want 3 (one try, two retries)", got)
	}
	if got, want := waits.seen(), []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("backoff ceilings = %v, want %v", got, want)
	}
}

func TestRetries5xxUntilSpent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
		body    string
		code    proto.Code
	}{
		{"default", client.DefaultRetries, `{"code":"INTERNAL","error":"internal error"}`, proto.Internal},
		{"none", 0, `{"code":"INTERNAL","error":"internal error"}`, proto.Internal},
		{"five", 5, `<html>bad gateway</html>`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.reqs.on("/health", func(_ int, rw http.ResponseWriter, _ *http.Request) bool {
				answer(rw, http.StatusInternalServerError, tc.body)
				return true
			})
			c := w.client(client.WithRetry((&noWait{}).policy(tc.retries)))
			_, err := c.Health(t.Context())
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *client.Error", err)
			}
			if e.Status != 500 || e.ErrorCode != tc.code || !e.Temporary() {
				t.Errorf("error = %+v, want status 500, code %q, temporary", e, tc.code)
			}
			if got := w.reqs.count("/health"); got != tc.retries+1 {
				t.Errorf("requests = %d, want %d", got, tc.retries+1)
			}
		})
	}
}

func TestNeverRetriesOther4xx(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	ctx := t.Context()
	n := w.node(c, "node")

	// Real answers of the registry.
	real := []struct {
		name   string
		path   string
		call   func() error
		status int
		code   proto.Code
	}{
		{"bad request", "/api/v1/register", func() error {
			_, err := n.Register(ctx, "has space:80", nil, "")
			return err
		}, 400, proto.BadRequest},
		{"unknown did", "/api/v1/heartbeat", func() error {
			_, err := n.Heartbeat(ctx)
			return err
		}, 404, proto.UnknownDID},
		{"no session", "/v1/operator/me/credits", func() error {
			_, err := c.OperatorCredits(ctx, "not-a-token")
			return err
		}, 401, proto.NoSession},
		{"not found", "/v1/bindings/nope/status", func() error {
			_, err := c.Status(ctx, "nope")
			return err
		}, 404, proto.NotFound},
	}
	for _, tc := range real {
		t.Run(tc.name, func(t *testing.T) {
			before := w.reqs.count(tc.path)
			err := tc.call()
			var e *client.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.ErrorCode != tc.code {
				t.Fatalf("err = %v, want HTTP %d %s", err, tc.status, tc.code)
			}
			if e.Temporary() {
				t.Errorf("HTTP %d counted as temporary", tc.status)
			}
			if got := w.reqs.count(tc.path) - before; got != 1 {
				t.Errorf("requests = %d, want exactly 1", got)
			}
		})
	}

	// Every other 4xx status, answered by a stand-in.
	for _, status := range []int{400, 401, 403, 404, 405, 409, 410, 413, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			path := "/health"
			w.reqs.on(path, func(_ int, rw http.ResponseWriter, _ *http.Request) bool {
				answer(rw, status, `{"code":"SOMETHING","error":"no"}`)
				return true
			})
			before := w.reqs.count(path)
			_, err := c.Health(ctx)
			if !errors.Is(err, &client.Error{ErrorCode: "SOMETHING", Status: status}) {
				t.Fatalf("err = %v, want HTTP %d SOMETHING", err, status)
			}
			if got := w.reqs.count(path) - before; got != 1 {
				t.Errorf("requests = %d, want exactly 1", got)
			}
		})
	}
}

// flaky is a transport whose first failures attempts fail as a refused connection would.
type flaky struct {
	failures int32
	attempts atomic.Int32
	next     http.RoundTripper
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.attempts.Add(1) <= f.failures {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return f.next.RoundTrip(r)
}

func TestRetriesNetworkErrors(t *testing.T) {
	w := newWorld(t)
	t.Run("recovers", func(t *testing.T) {
		tr := &flaky{failures: 2, next: http.DefaultTransport}
		c := w.client(client.WithHTTPClient(&http.Client{Transport: tr}))
		if _, err := c.Health(t.Context()); err != nil {
			t.Fatalf("Health after two refused connections: %v", err)
		}
		if got := tr.attempts.Load(); got != 3 {
			t.Errorf("attempts = %d, want 3", got)
		}
	})
	t.Run("gives up with TRANSPORT_ERROR", func(t *testing.T) {
		tr := &flaky{failures: 100, next: http.DefaultTransport}
		c := w.client(client.WithHTTPClient(&http.Client{Transport: tr}))
		_, err := c.Health(t.Context())
		if !errors.Is(err, client.ErrTransport) || client.CodeOf(err) != proto.TransportError {
			t.Fatalf("err = %v (code %q), want TRANSPORT_ERROR", err, client.CodeOf(err))
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("err = %v does not unwrap to the refused connection", err)
		}
		var te *client.TransportError
		if !errors.As(err, &te) || te.Method != "GET" || te.Path != "/health" {
			t.Errorf("err = %#v, want a *TransportError naming GET /health", err)
		}
		if got := tr.attempts.Load(); got != 3 {
			t.Errorf("attempts = %d, want 3", got)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		c, err := client.New("http://"+testkit.FreeAddr(t), client.WithRetry((&noWait{}).policy(1)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Health(t.Context())
		if !errors.Is(err, client.ErrTransport) {
			t.Fatalf("err = %v, want TRANSPORT_ERROR", err)
		}
	})
}

func TestTimeoutIsTransportError(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := client.New(srv.URL,
		client.WithHTTPClient(&http.Client{Timeout: 50 * time.Millisecond}),
		client.WithRetry(client.RetryPolicy{Retries: 0}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Health(t.Context())
	var ne net.Error
	if !errors.Is(err, client.ErrTransport) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a TRANSPORT_ERROR that is a time-out", err)
	}
}

func TestCancelledContextIsNotRetried(t *testing.T) {
	w := newWorld(t)
	tr := &flaky{next: http.DefaultTransport}
	c := w.client(client.WithHTTPClient(&http.Client{Transport: tr}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Health(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, client.ErrTransport) {
		t.Fatalf("err = %v, want a TRANSPORT_ERROR wrapping context.Canceled", err)
	}
	if got := tr.attempts.Load(); got > 1 {
		t.Errorf("attempts = %d, want at most 1", got)
	}
}

func TestBackoffCeilings(t *testing.T) {
	p := client.DefaultRetryPolicy()
	want := []time.Duration{250, 500, 1000, 2000, 4000, 5000, 5000}
	for n, w := range want {
		if got := p.Ceiling(n); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if got := p.Ceiling(200); got != client.DefaultBackoffCap {
		t.Errorf("Ceiling(200) = %v, want the cap", got)
	}
	// Zero fields read as the defaults.
	if got := (client.RetryPolicy{}).Ceiling(1); got != 500*time.Millisecond {
		t.Errorf("zero policy Ceiling(1) = %v, want 500ms", got)
	}
}

func TestRequestsWithSideEffectsRetryAsAWhole(t *testing.T) {
	t.Run("login takes a fresh challenge", func(t *testing.T) {
		w := newWorld(t)
		// The first login reaches the registry, which consumes its challenge, but the
		// answer is lost. Repeating that request could only get BAD_CHALLENGE.
		w.reqs.on("/v1/auth/device-login", func(n int, rw http.ResponseWriter, r *http.Request) bool {
			return n == 1 && swallow(w.reqs.next, http.StatusBadGateway)(n, rw, r)
		})
		op := w.operator(w.client(), "op")
		if op.DID == "" || op.Token == "" {
			t.Fatalf("login returned %v without a session", op)
		}
		if got := w.reqs.count("/v1/auth/challenge"); got != 2 {
			t.Errorf("challenges = %d, want 2", got)
		}
		if got := w.reqs.count("/v1/auth/device-login"); got != 2 {
			t.Errorf("logins = %d, want 2", got)
		}
	})
	t.Run("initiate takes a fresh session id", func(t *testing.T) {
		w := newWorld(t)
		var ids []string
		w.reqs.on("/v1/bindings/initiate", func(n int, rw http.ResponseWriter, r *http.Request) bool {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				ID string `json:"binding_session_id"`
			}
			json.Unmarshal(body, &req)
			ids = append(ids, req.ID)
			if n == 1 {
				return swallow(w.reqs.next, http.StatusBadGateway)(n, rw, r)
			}
			return false
		})
		c := w.client()
		n := w.node(c, "node")
		res, err := n.Initiate(t.Context(), client.InitiateOptions{TaskTypes: []string{"inference"}})
		if err != nil {
			t.Fatalf("Initiate: %v", err)
		}
		if len(ids) != 2 || ids[0] == ids[1] || ids[0] == "" {
			t.Fatalf("session ids sent = %q, want two different ones", ids)
		}
		if res.BindingSessionID != ids[1] || res.State != "INITIATED" || res.ShortCode == "" {
			t.Errorf("result = id %q state %q code present %v, want id %q", res.BindingSessionID, res.State, res.ShortCode != "", ids[1])
		}
		// The lost attempt did open a session: its id is spent, which is why the retry
		// could not reuse it.
		st, err := c.Status(t.Context(), ids[0])
		if err != nil || st.State != "INITIATED" {
			t.Errorf("lost attempt's session: %+v, %v", st, err)
		}
	})
	t.Run("a chosen session id is sent once", func(t *testing.T) {
		w := newWorld(t)
		w.reqs.on("/v1/bindings/initiate", func(n int, rw http.ResponseWriter, r *http.Request) bool {
			return swallow(w.reqs.next, http.StatusBadGateway)(n, rw, r)
		})
		n := w.node(w.client(), "node")
		_, err := n.Initiate(t.Context(), client.InitiateOptions{SessionID: "chosen-1"})
		if client.CodeOf(err) != proto.Internal {
			t.Fatalf("err = %v, want the 502 answer", err)
		}
		if got := w.reqs.count("/v1/bindings/initiate"); got != 1 {
			t.Errorf("initiates = %d, want 1", got)
		}
	})
}

func TestNewRefusesBadInput(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "http://x/?q=1"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := client.New("http://x", client.WithPrefix("bad prefix")); err == nil {
		t.Error("New accepted a prefix with a space")
	}
	c, err := client.New("http://127.0.0.1:8080/reg/")
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://127.0.0.1:8080/reg" || c.Prefix() != "service" {
		t.Errorf("BaseURL %q prefix %q", c.BaseURL(), c.Prefix())
	}
}

// A 503 with Retry-After is retried no sooner than it asks, within the policy's cap, and the
// error of the last attempt carries what it asked.
func TestRetryAfterIsAFloor(t *testing.T) {
	w := newWorld(t)
	w.reqs.on("/health", func(n int, rw http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			rw.Header().Set("Retry-After", "2")
			answer(rw, http.StatusServiceUnavailable, `{"code":"STORE_UNAVAILABLE","error":"later"}`)
			return true
		}
		return false
	})
	p := (&noWait{}).policy(1)
	p.Cap = 150 * time.Millisecond
	start := time.Now()
	if _, err := w.client(client.WithRetry(p)).Health(t.Context()); err != nil {
		t.Fatalf("Health after a 503: %v", err)
	}
	if took := time.Since(start); took < p.Cap {
		t.Errorf("retried after %v, want no sooner than the cap of %v that bounds Retry-After", took, p.Cap)
	}

	w.reqs.on("/health", func(_ int, rw http.ResponseWriter, _ *http.Request) bool {
		rw.Header().Set("Retry-After", "2")
		answer(rw, http.StatusServiceUnavailable, `{"code":"STORE_UNAVAILABLE","error":"later"}`)
		return true
	})
	_, err := w.client(client.WithRetry((&noWait{}).policy(0))).Health(t.Context())
	var e *client.Error
	if !errors.As(err, &e) || e.RetryAfter != 2*time.Second || e.ErrorCode != proto.StoreUnavailable {
		t.Errorf("err = %#v, want STORE_UNAVAILABLE with RetryAfter 2s", err)
	}
}
