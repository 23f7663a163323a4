package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/pause"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// Defaults of a new Client.
const (
	// DefaultTimeout bounds one HTTP attempt when no http.Client is given, so that a registry
	// that never answers gives a TRANSPORT_ERROR instead of a hang.
	DefaultTimeout = 30 * time.Second
	// DefaultOnlineWindow is how recently a node must have been seen to count as online
	// (description 2.2 and 8).
	DefaultOnlineWindow = 10 * time.Minute
	// maxResponseBytes bounds what the client reads of one answer; a full node table of a
	// large network fits many times over.
	maxResponseBytes = 32 << 20
	userAgent        = "svrp-client/1"
)

// Client talks to one registry. It is safe for concurrent use; its zero value is not usable,
// make one with [New].
type Client struct {
	base   string // scheme://host[/path], no trailing slash
	http   *http.Client
	prefix string
	retry  RetryPolicy
	clock  func() time.Time
	rand   io.Reader
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its Transport for TLS and proxies, its Timeout for one
// attempt). Default: an http.Client with [DefaultTimeout].
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) {
		if h != nil {
			c.http = h
		}
	}
}

// WithPrefix sets the domain prefix of every message the client signs; it must be the
// registry's. Default "service"; the live network uses "libertynet".
func WithPrefix(prefix string) Option { return func(c *Client) { c.prefix = prefix } }

// WithRetry sets the retry policy (see [RetryPolicy] for how zero fields are read).
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.normalized() } }

// WithClock sets the time source of every timestamp the client signs (ts, issued_at,
// created_at) and of the client-side online filter. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now != nil {
			c.clock = now
		}
	}
}

// WithRand sets the source of binding session ids, nonces and revocation ids. Default
// crypto/rand.Reader.
func WithRand(r io.Reader) Option {
	return func(c *Client) {
		if r != nil {
			c.rand = r
		}
	}
}

// New returns a client of the registry at baseURL, an http or https URL such as
// "http://127.0.0.1:8080" (a path, if any, is kept as a prefix of every endpoint).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("svrp client: registry URL %q: want http(s)://host[:port][/path]", baseURL)
	}
	c := &Client{
		base:   strings.TrimRight(u.String(), "/"),
		http:   &http.Client{Timeout: DefaultTimeout},
		prefix: canonical.DefaultPrefix,
		retry:  DefaultRetryPolicy(),
		clock:  time.Now,
		rand:   rand.Reader,
	}
	for _, o := range opts {
		o(c)
	}
	if err := canonical.CheckPrefix(c.prefix); err != nil {
		return nil, fmt.Errorf("svrp client: %w", err)
	}
	return c, nil
}

// BaseURL returns the registry's URL as the client uses it.
func (c *Client) BaseURL() string { return c.base }

// Prefix returns the domain prefix the client signs under.
func (c *Client) Prefix() string { return c.prefix }

// now is the client's clock in whole seconds, the precision of every signed timestamp.
func (c *Client) now() time.Time { return c.clock().UTC().Truncate(time.Second) }

// request is one call to the registry.
type request struct {
	method string
	path   string // escaped path, beginning with '/'
	query  url.Values
	token  string // bearer; "" for none
	body   any    // marshalled to JSON; nil sends no body
	// replaySafe marks a request the protocol answers alike however often it arrives (a
	// signed registration or heartbeat), so that the transport may send it again on a new
	// connection when the registry closed an idle keep-alive one as it was being reused.
	replaySafe bool
}

// call runs req with the retry policy and decodes a 2xx JSON answer into out (when not nil).
func (c *Client) call(ctx context.Context, req request, out any) error {
	var raw []byte
	if req.body != nil {
		var err error
		if raw, err = json.Marshal(req.body); err != nil {
			return fmt.Errorf("svrp client: encoding %s %s: %w", req.method, req.path, err)
		}
	}
	return c.retrying(ctx, func() error {
		b, err := c.once(ctx, req, raw)
		if err != nil || out == nil {
			return err
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("svrp client: %s %s: the answer is not the expected JSON: %w", req.method, req.path, err)
		}
		return nil
	})
}

// send is call for an endpoint whose 2xx answer is a T.
func send[T any](ctx context.Context, c *Client, req request) (T, error) {
	var out T
	err := c.call(ctx, req, &out)
	return out, err
}

// once makes one HTTP attempt and returns the body of a 2xx answer. A non-2xx answer is an
// [*Error]; no answer at all is a [*TransportError].
func (c *Client) once(ctx context.Context, req request, raw []byte) ([]byte, error) {
	target := c.base + req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	var body io.Reader
	if raw != nil {
		body = bytes.NewReader(raw)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("svrp client: building %s %s: %w", req.method, req.path, err)
	}
	if raw != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", userAgent)
	if req.token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.token)
	}
	if req.replaySafe {
		// Go's transport retries a request on a reused connection that closed before any
		// answer only when it is idempotent; a nil Idempotency-Key says so without sending it.
		hr.Header["Idempotency-Key"] = nil
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		// The url.Error around err repeats the URL; the TransportError names the request.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &TransportError{Method: req.method, Path: req.path, Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, &TransportError{Method: req.method, Path: req.path, Err: err}
	}
	if len(b) > maxResponseBytes {
		return nil, fmt.Errorf("svrp client: %s %s: the answer is over %d bytes", req.method, req.path, maxResponseBytes)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return b, nil
	}
	e := &Error{Status: resp.StatusCode}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(min(secs, maxRetryAfter)) * time.Second
	}
	var eb api.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Code != "" {
		e.ErrorCode, e.Message = proto.Code(eb.Code), eb.Error
	} else {
		e.Message = "the answer carries no svrp error body"
	}
	return nil, e
}

// retrying runs attempt until it succeeds, fails in a way the protocol does not retry, the
// retries are spent, or ctx is done. Sleeps follow the policy's backoff.
func (c *Client) retrying(ctx context.Context, attempt func() error) error {
	for n := 0; ; n++ {
		err := attempt()
		if err == nil || n >= c.retry.Retries || !retryable(ctx, err) {
			return err
		}
		wait := c.retry.delay(n)
		// A registry that said how long to wait is not asked sooner, within the policy's cap.
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > wait {
			wait = min(e.RetryAfter, c.retry.Cap)
		}
		if werr := pause.For(ctx, wait); werr != nil {
			// The caller gave up while we waited: the last answer says more than ctx does.
			return err
		}
	}
}

// maxRetryAfter bounds the Retry-After read, in seconds, so that no answer can make a
// client wait for ever.
const maxRetryAfter = 3600

// retryable reports whether the protocol lets the client try err again: HTTP 429, 5xx and
// network errors. A cancelled or expired ctx is the caller's decision, and a certificate
// that does not verify will not verify on the next attempt either.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Temporary()
	}
	var te *TransportError
	if !errors.As(err, &te) {
		return false
	}
	var cert *tls.CertificateVerificationError
	return !errors.As(err, &cert)
}

// randomHex returns n random bytes of the client's source in hex.
func (c *Client) randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(c.rand, b); err != nil {
		return "", fmt.Errorf("svrp client: drawing random bytes: %w", err)
	}
	return fmt.Sprintf("%x", b), nil
}
