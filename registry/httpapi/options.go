package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/svrp/svrp/proto"
)

// Option changes what [New] serves beside the API itself, or how it tells clients apart.
type Option func(*options)

type options struct {
	origins        map[string]bool
	metrics        http.Handler
	observe        func(Exchange)
	trustedProxies []netip.Prefix
	addressHeader  string
}

// WithClientAddress trusts the peers in proxies to name the client in header:
// HeaderXForwardedFor (also for "", in any case) or HeaderForwarded; any other header is an
// error. The other one of the two is never read, since a client may send it through the
// proxy with any address in it; for a peer that is not a trusted proxy, neither is. Without
// this option no proxy is trusted.
func WithClientAddress(header string, proxies ...netip.Prefix) (Option, error) {
	switch h := http.CanonicalHeaderKey(header); h {
	case "":
		header = HeaderXForwardedFor
	case HeaderXForwardedFor, HeaderForwarded:
		header = h
	default:
		return nil, fmt.Errorf("httpapi: client address header %q: want %s or %s", header, HeaderXForwardedFor, HeaderForwarded)
	}
	proxies = slices.Clone(proxies)
	return func(o *options) { o.addressHeader, o.trustedProxies = header, proxies }, nil
}

// WithCORSOrigins lets pages of these origins (scheme://host[:port], as a browser sends
// them in Origin) call the API: their preflights are answered and their requests get
// Access-Control-Allow-Origin. Other origins get no CORS header, so browsers keep their
// pages from reading the answers. Without this option no origin is allowed.
func WithCORSOrigins(origins ...string) Option {
	return func(o *options) {
		if o.origins == nil {
			o.origins = map[string]bool{}
		}
		for _, origin := range origins {
			o.origins[strings.ToLower(strings.TrimSuffix(origin, "/"))] = true
		}
	}
}

// WithMetrics serves m at GET /metrics. Without it, /metrics answers NOT_FOUND: a daemon
// that serves its metrics on another address keeps them off the API's listener.
func WithMetrics(m http.Handler) Option {
	return func(o *options) { o.metrics = m }
}

// WithObserver calls fn once per request, after the answer was written, with what a
// request counter needs. fn must be quick and safe for concurrent use.
func WithObserver(fn func(Exchange)) Option {
	return func(o *options) { o.observe = fn }
}

// RouteUnknown is the route of a request to a path that is no endpoint.
const RouteUnknown = "unknown"

// Exchange is one answered request, as an observer sees it.
type Exchange struct {
	Method string
	// Route is the endpoint's path template, such as /v1/bindings/{id}/status, or
	// RouteUnknown: never the path itself, so ids and codes stay out of metrics.
	Route string
	// Status is the HTTP status of the answer.
	Status int
	// Code is the protocol code of an error answer; "" for a success.
	Code proto.Code
	// Limit names the rate limit that refused a RATE_LIMITED answer
	// (registry.LimitResolvePerCode, ...); "" for any other answer.
	Limit    string
	Duration time.Duration
}

// corsMaxAge is how long a browser may keep a preflight's answer.
const corsMaxAge = 10 * time.Minute

// cors answers OPTIONS itself, consistently with the Allow header (204 on a known path, 404
// on any other), and adds the CORS headers for the allowed origins.
func (h *handler) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := origin != "" && h.opts.origins[strings.ToLower(origin)]
		if len(h.opts.origins) > 0 {
			w.Header().Add("Vary", "Origin")
		}
		if r.Method != http.MethodOptions {
			if allowed {
				w.Header().Set("Access-Control-Allow-Origin", origin)
				w.Header().Set("Access-Control-Expose-Headers", "ETag, Link")
			}
			next.ServeHTTP(w, r)
			return
		}
		if !knownPath(r.URL.Path) {
			h.fail(w, proto.New(proto.NotFound, "no such endpoint"))
			return
		}
		allow := allowOf(r.URL.Path)
		w.Header().Set("Allow", allow)
		if allowed && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Methods", allow)
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-None-Match")
			w.Header().Set("Access-Control-Max-Age", strconv.Itoa(int(corsMaxAge/time.Second)))
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (h *handler) metrics(w http.ResponseWriter, r *http.Request, _ call) {
	if h.opts.metrics == nil {
		h.fail(w, proto.New(proto.NotFound, "no metrics on this address"))
		return
	}
	h.opts.metrics.ServeHTTP(w, r)
}
