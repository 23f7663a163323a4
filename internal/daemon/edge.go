package daemon

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/svrp/svrp/registry/httpapi"
)

// Edge is how svrpd tells strangers apart at its edge: which header names the client behind
// a trusted proxy, and how long a connection may take to deliver a request before it is the first
// to go when the connections run out.
type Edge struct {
	// ClientAddressHeader is the header the trusted proxies write the client's address in
	// (--client-address-header): httpapi.HeaderXForwardedFor or httpapi.HeaderForwarded.
	ClientAddressHeader string
	// RequestGrace is how long a connection may take to deliver a complete request (its
	// headers and body) before, at the connection cap, it is cut first (--request-grace).
	RequestGrace time.Duration
	// RefusalDelay is how long a 429 answer is held back (--refusal-delay; zero sends it at
	// once). svrpd serve's flag defaults to DefaultRefusalDelay.
	RefusalDelay time.Duration
	// SendFloor is the rate, in bytes a second, below which an answer's connection counts
	// as stalled and is cut first at the connection cap (--send-floor; progress.go).
	SendFloor int
	// SendTimeout is how long a piece of an answer may make no progress before its
	// connection (HTTP/2: its stream) is cut, at the cap or not (--send-timeout).
	SendTimeout time.Duration
	// ConnectionLifetime is the age past which, at the connection cap, a connection making
	// progress is cut before younger ones (--connection-lifetime).
	ConnectionLifetime time.Duration
}

// DefaultRequestGrace is the default of --request-grace. An honest client sends a request
// of at most 64 KiB in well under a second on any link the registry serves; a connection
// that has not done so in two is either idle on purpose or slow on purpose.
const DefaultRequestGrace = 2 * time.Second

// DefaultRefusalDelay is the default of --refusal-delay. A client refused for spending its
// own budget is told so a second late: one that waits for its answers, as HTTP clients do,
// then floods at one request a second per connection, and its connections per address are
// capped, so a flood past a budget costs the daemon little more than the budget itself. An
// honest client is refused only for what it spent, and a second is nothing beside the
// Retry-After it is asked to honour. A client that does not wait for its answers still
// costs each refusal in full: the bounds hold without the delay (the abuse tests run
// without it).
const DefaultRefusalDelay = time.Second

func (e Edge) withDefaults() Edge {
	if e.ClientAddressHeader == "" {
		e.ClientAddressHeader = httpapi.HeaderXForwardedFor
	}
	if e.RequestGrace == 0 {
		e.RequestGrace = DefaultRequestGrace
	}
	if e.SendFloor == 0 {
		e.SendFloor = DefaultSendFloor
	}
	if e.SendTimeout == 0 {
		e.SendTimeout = DefaultSendTimeout
	}
	if e.ConnectionLifetime == 0 {
		e.ConnectionLifetime = DefaultConnectionLifetime
	}
	return e
}

// validate checks e; zero fields take their defaults, so a Config written before they
// existed still validates.
func (e Edge) validate() []error {
	var errs []error
	switch http.CanonicalHeaderKey(e.ClientAddressHeader) {
	case "", httpapi.HeaderXForwardedFor, httpapi.HeaderForwarded:
	default:
		errs = append(errs, fmt.Errorf("--client-address-header %q: want %s or %s", e.ClientAddressHeader, httpapi.HeaderXForwardedFor, httpapi.HeaderForwarded))
	}
	if e.RequestGrace < 0 {
		errs = append(errs, errors.New("--request-grace must be positive"))
	}
	if e.SendFloor < 0 || e.SendTimeout < 0 || e.ConnectionLifetime < 0 {
		errs = append(errs, errors.New("--send-floor, --send-timeout and --connection-lifetime must be positive"))
	}
	if e.RefusalDelay < 0 {
		errs = append(errs, errors.New("--refusal-delay must be zero or positive"))
	}
	return errs
}

func (e *Edge) flags(fs *flag.FlagSet) {
	fs.StringVar(&e.ClientAddressHeader, "client-address-header", httpapi.HeaderXForwardedFor,
		"the header a --trusted-proxy writes the client's address in: X-Forwarded-For or Forwarded (the other is ignored)")
	fs.DurationVar(&e.RequestGrace, "request-grace", DefaultRequestGrace,
		"time a connection may take to deliver a complete request; at --max-connections, connections past it (and idle ones) are cut first, from the address group holding most, oldest first")
	fs.DurationVar(&e.RefusalDelay, "refusal-delay", DefaultRefusalDelay,
		"how long a 429 answer is held back, so that a client flooding past its budget waits instead of costing the daemon; its connection is the first cut at --max-connections meanwhile (0: answer at once)")
	fs.IntVar(&e.SendFloor, "send-floor", DefaultSendFloor,
		"bytes a second an answer must drain at to hold its connection's slot; at --max-connections a slower one is cut first (HTTP/2 streams included)")
	fs.DurationVar(&e.SendTimeout, "send-timeout", DefaultSendTimeout,
		"time a piece of an answer may make no progress before its connection (HTTP/2: its stream) is cut, whether or not the connections run out")
	fs.DurationVar(&e.ConnectionLifetime, "connection-lifetime", DefaultConnectionLifetime,
		"age past which, at --max-connections, a connection still making progress is cut before younger ones, so that pipelined requests and HTTP/2 streams cannot hold a slot for ever")
}

// option is the handler's share of e: the header the proxies in trusted name the client in.
func (e Edge) option(trusted []netip.Prefix) (httpapi.Option, error) {
	return httpapi.WithClientAddress(e.ClientAddressHeader, trusted...)
}
