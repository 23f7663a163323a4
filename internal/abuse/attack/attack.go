// Package attack holds the rows of the abuse suite: each way a stranger could try to exhaust a
// registry, as the requests it sends and the bound the registry keeps against it. The abuse
// tests (internal/abuse) send these requests to a daemon whose limits they lower, so that each
// bound is reached and asserted; the load tool (svrpd bench --scenario abuse) floods a daemon
// that keeps its default limits with them and measures what honest clients see meanwhile.
//
// Every request leaves from a loopback address of its own choosing (Linux routes all of
// 127.0.0.0/8 to lo), so that per-address limits see attackers as the strangers they would be.
// It is not a client library: requests are built as an attacker builds them, malformed ones
// included.
package attack

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
)

// The address groups: Addr(group, i) is 127.<group>.x.y.
const (
	Attackers = 1
	Honest    = 2
	Reference = 3
)

// Addr is the i-th address of a group.
func Addr(group, i int) string {
	return fmt.Sprintf("127.%d.%d.%d", group, i/250%250, i%250+1)
}

// Thin is the address of the i-th of many address blocks spread over 16 networks from
// 127.<network>.0.0/16 on: 127.(network + i%16).(i/16%250).1, one address in each /24, so
// that the first 4,000 name 4,000 blocks of 16 networks. A party that holds one entry per
// block never makes a block hold the most.
func Thin(network, i int) string {
	return fmt.Sprintf("127.%d.%d.1", network+i%16, i/16%250)
}

// From returns an HTTP client whose connections leave from the loopback address ip.
func From(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
}

// Target is a registry under attack, and a client per source address so that connections
// are reused as an attacker's would be.
type Target struct {
	URL    string // without a trailing slash
	Prefix string // of every signed message
	// TLS, for a registry served over HTTPS, is the clients' configuration: the roots
	// that trust its certificate. Set it before the first client is made.
	TLS *tls.Config

	mu      sync.Mutex
	http    map[string]*http.Client
	clients map[string]*client.Client
}

// NewTarget is the registry at url, signing with prefix ("" for the default).
func NewTarget(url, prefix string) *Target {
	if prefix == "" {
		prefix = canonical.DefaultPrefix
	}
	return &Target{URL: strings.TrimRight(url, "/"), Prefix: prefix, http: map[string]*http.Client{}, clients: map[string]*client.Client{}}
}

// HTTP is the target's HTTP client from ip.
func (t *Target) HTTP(ip string) *http.Client {
	t.mu.Lock()
	defer t.mu.Unlock()
	hc, ok := t.http[ip]
	if !ok {
		hc = From(ip)
		if t.TLS != nil {
			tr := hc.Transport.(*http.Transport)
			// A transport with its own dialer speaks HTTP/2 only when asked to.
			tr.TLSClientConfig, tr.ForceAttemptHTTP2 = t.TLS.Clone(), true
		}
		t.http[ip] = hc
	}
	return hc
}

// Client is a registry client that sends from ip and never retries.
func (t *Target) Client(ip string) *client.Client {
	hc := t.HTTP(ip)
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.clients[ip]
	if !ok {
		// New fails only on a malformed URL, which NewTarget's callers never pass.
		c, _ = client.New(t.URL, client.WithHTTPClient(hc), client.WithRetry(client.RetryPolicy{}), client.WithPrefix(t.Prefix))
		t.clients[ip] = c
	}
	return c
}

// Forwarded is a registry client that sends from proxy, a trusted proxy of the registry
// (svrpd serve --trusted-proxy), on behalf of the client address addr, which it names in
// X-Forwarded-For: how one loopback host plays clients of any address family.
// Its connections are the proxy's, shared by every client it forwards for.
func (t *Target) Forwarded(proxy, addr string) *client.Client {
	hc := *t.HTTP(proxy)
	hc.Transport = forwardFor{hc.Transport, addr}
	// New fails only on a malformed URL, which NewTarget's callers never pass.
	c, _ := client.New(t.URL, client.WithHTTPClient(&hc), client.WithRetry(client.RetryPolicy{}), client.WithPrefix(t.Prefix))
	return c
}

// forwardFor names addr in X-Forwarded-For of every request it sends.
type forwardFor struct {
	rt   http.RoundTripper
	addr string
}

func (f forwardFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.addr)
	return f.rt.RoundTrip(r)
}

// Answer is one response: its status, error code and body. A request that got no answer
// has status 0 and its error as the code.
type Answer struct {
	Status int
	Code   string
	Body   []byte
}

func (a Answer) String() string { return fmt.Sprintf("%d %s", a.Status, bytes.TrimSpace(a.Body)) }

// Outcome is what a load tool counts of an answer: "200", the error code, or the status.
func (a Answer) Outcome() string {
	switch {
	case a.Status == http.StatusOK:
		return "200"
	case a.Code != "":
		return a.Code
	}
	return fmt.Sprint(a.Status)
}

// Of is the answer a registry client's call came back with.
func Of(err error) Answer {
	if err == nil {
		return Answer{Status: http.StatusOK}
	}
	return Answer{Code: string(client.CodeOf(err))}
}

// Send makes one request from hc with body as JSON (nil for none) and header. The body is
// written as an attacker writes it: '<' as itself, not as \u003c.
func (t *Target) Send(ctx context.Context, hc *http.Client, method, path string, body any, header http.Header) Answer {
	var rd io.Reader
	if body != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			return Answer{Code: err.Error()}
		}
		rd = &buf
	}
	return t.do(ctx, hc, method, path, rd, header)
}

// Post sends body, JSON encoded before, to path from hc: a request an attacker prepared
// before sending it.
func (t *Target) Post(ctx context.Context, hc *http.Client, path string, body []byte) Answer {
	return t.do(ctx, hc, http.MethodPost, path, bytes.NewReader(body), nil)
}

// do makes one request with body (nil for none) as JSON and reads its answer.
func (t *Target) do(ctx context.Context, hc *http.Client, method, path string, body io.Reader, header http.Header) Answer {
	req, err := http.NewRequestWithContext(ctx, method, t.URL+path, body)
	if err != nil {
		return Answer{Code: err.Error()}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		return Answer{Code: err.Error()}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var e api.ErrorBody
	if res.StatusCode != http.StatusOK {
		json.Unmarshal(raw, &e)
	}
	return Answer{Status: res.StatusCode, Code: e.Code, Body: raw}
}

// Operator is an operator identity with a device credential, made up on the spot: anyone can
// make one.
type Operator struct {
	Root, Device ed25519.PrivateKey
	Credential   authn.DeviceCredential
}

// NewOperator makes a fresh operator identity.
func NewOperator() (Operator, error) {
	_, root, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Operator{}, err
	}
	dpub, device, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Operator{}, err
	}
	cred, err := client.IssueDeviceCredential(root, dpub, client.CredentialOptions{IssuedAt: time.Now().Add(-time.Minute)})
	return Operator{Root: root, Device: device, Credential: cred}, err
}

// Login logs o in through c.
func (o Operator) Login(ctx context.Context, c *client.Client) (*client.Operator, error) {
	return c.Login(ctx, o.Device, o.Credential)
}

// FreshNode is a new node key on c.
func FreshNode(c *client.Client) (*client.Node, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return client.NewNode(c, key, didkey.FormShort)
}

// HugeSignature is a signature field that, with the rest of a registration, is just under
// the 64 KiB body limit.
var HugeSignature = strings.Repeat("<", 63<<10)

// HugeRegistration is a registration of key whose signature is HugeSignature.
func HugeRegistration(key didkey.PublicKey) api.RegisterRequest {
	did, _ := didkey.NodeDID(key, didkey.FormShort)
	return api.RegisterRequest{DID: did.String(), PublicKey: key.Hex(), Endpoint: "203.0.113.1:7000", Capabilities: []string{}, Signature: &HugeSignature}
}

// Listing reads GET /nodes with the i-th online_within value, each a filter of its own, and
// discards the body; it returns the status and the body's size.
func (t *Target) Listing(ctx context.Context, hc *http.Client, i int) (int, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/nodes?online_within=%d", t.URL, 1000+i), nil)
	if err != nil {
		return 0, 0, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	n, err := io.Copy(io.Discard, res.Body)
	return res.StatusCode, n, err
}

// GarbageLogin sends a login of cred with a garbage signature over a fresh challenge.
func GarbageLogin(ctx context.Context, c *client.Client, cred authn.DeviceCredential) error {
	ch, err := c.Challenge(ctx)
	if err != nil {
		return err
	}
	_, err = c.DeviceLogin(ctx, authn.Login{
		DeviceCredential: cred, Challenge: ch.Challenge,
		IssuedAt: canonical.FormatTime(time.Now()), Signature: strings.Repeat("1", 64),
	})
	return err
}

// WrongCode is the i-th of a sequence of well-formed short codes that no session has: each
// guess a different code, so the per-code budget never speaks.
func WrongCode(i int) string {
	const a = binding.ShortCodeAlphabet
	b := []byte("ZZZZZZZZ")
	for j := 5; j >= 0; j-- {
		b[j] = a[i%len(a)]
		i /= len(a)
	}
	return string(b)
}

// Resolve sends a resolve of code with token as the bearer, from hc, with extra headers.
func (t *Target) Resolve(ctx context.Context, hc *http.Client, token, code string, header http.Header) Answer {
	h := http.Header{"Authorization": {"Bearer " + token}}
	for k, v := range header {
		h[k] = v
	}
	return t.Send(ctx, hc, http.MethodPost, "/v1/bindings/resolve", map[string]string{"short_code": code}, h)
}

// Hold opens a connection from ip, makes one request on it and leaves it open and idle; it
// fails if the daemon closes the connection instead of answering.
func (t *Target) Hold(ip string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(t.URL, "http://"))
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: svrpd\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	c.SetDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, err
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		c.Close()
		return nil, fmt.Errorf("GET /health on a held connection: %q", strings.TrimSpace(line))
	}
	return c, nil
}

// Copied is a registration built from a listed record: every field and the signature are
// public, so anyone can post it again.
func Copied(v api.NodeView) api.RegisterRequest {
	region := ""
	if v.Region != nil {
		region = *v.Region
	}
	return api.RegisterRequest{DID: v.DID, PublicKey: v.PublicKey, Endpoint: v.Endpoint, Capabilities: v.Capabilities, Region: region, Signature: v.Signature}
}
