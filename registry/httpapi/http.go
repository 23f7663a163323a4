package httpapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svrp/svrp/registry/budget"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// MaxBodyBytes is the largest request body the API reads (docs/protocol.md §8).
const MaxBodyBytes = 64 << 10

// statusOf maps every protocol code to its HTTP status (docs/protocol.md §7). It is the only
// place where errors meet HTTP.
var statusOf = map[proto.Code]int{
	proto.BadRequest:        http.StatusBadRequest,
	proto.TTLTooLong:        http.StatusBadRequest,
	proto.AlreadyExpired:    http.StatusBadRequest,
	proto.IDBindingFailed:   http.StatusUnauthorized,
	proto.IDBindingRequired: http.StatusUnauthorized,
	proto.BadSignature:      http.StatusUnauthorized,
	proto.NoSession:         http.StatusUnauthorized,
	proto.SessionExpired:    http.StatusUnauthorized,
	proto.BadChallenge:      http.StatusUnauthorized,
	proto.DCIDBinding:       http.StatusUnauthorized,
	proto.DCBadSignature:    http.StatusUnauthorized,
	proto.DCExpired:         http.StatusUnauthorized,
	proto.StaleTS:           http.StatusUnauthorized,
	proto.AuthzExpired:      http.StatusUnauthorized,
	proto.DCRevoked:         http.StatusUnauthorized,
	proto.AuthzRevoked:      http.StatusUnauthorized,
	proto.PermissionDenied:  http.StatusForbidden,
	proto.ScopeExceeded:     http.StatusForbidden,
	proto.NotFound:          http.StatusNotFound,
	proto.UnknownDID:        http.StatusNotFound,
	proto.MethodNotAllowed:  http.StatusMethodNotAllowed,
	proto.SessionExists:     http.StatusConflict,
	proto.BadState:          http.StatusConflict,
	proto.AlreadyActive:     http.StatusConflict,
	proto.DIDCollision:      http.StatusConflict,
	proto.PayloadTooLarge:   http.StatusRequestEntityTooLarge,
	proto.RateLimited:       http.StatusTooManyRequests,
	proto.Internal:          http.StatusInternalServerError,
	proto.StoreUnavailable:  http.StatusServiceUnavailable,
}

// openAPI is the OpenAPI 3.1 document of the API, served at GET /openapi.json. A test holds
// it against the router and validates real requests and answers with it.
//
//go:embed openapi.json
var openAPI []byte

// endpoint is one endpoint of the API: its method, its path template ({id} stands for a
// binding session id, {tile} for a tile's path, the rest of the path) and what serves it.
type endpoint struct {
	method, path string
	serve        func(h *handler, w http.ResponseWriter, r *http.Request, c call)
}

// call is what ServeHTTP learned of a request before it chose the endpoint, read once: the
// path's binding session id or tile path, for the templates that have one, and the client
// address.
type call struct{ id, addr string }

// endpoints is the API, and its router: ServeHTTP serves a request with the entry its method
// and path name. The Allow header, the choice of 404 or 405 and the route a request is
// counted under come from the same table, and the tests hold it against the OpenAPI
// document, so an endpoint one of them lacks fails a test. A table rather than httprouter,
// which cannot hold /v1/bindings/initiate beside /v1/bindings/{id}/cancel, or net/http's
// ServeMux, which redirects the unclean paths the API answers 404.
var endpoints = []endpoint{
	{"GET", "/health", (*handler).health},
	{"GET", "/ready", (*handler).ready},
	{"GET", "/nodes", (*handler).nodes},
	{"GET", "/peers", (*handler).peers},
	{"GET", "/api/v1/peers", (*handler).apiPeers},
	{"GET", "/v1/network/stats", (*handler).networkStats},
	{"POST", "/api/v1/register", (*handler).register},
	{"POST", "/api/v1/heartbeat", (*handler).heartbeat},
	{"POST", "/v1/auth/challenge", (*handler).challenge},
	{"POST", "/v1/auth/device-login", (*handler).deviceLogin},
	{"POST", "/v1/auth/logout", (*handler).logout},
	{"POST", "/v1/auth/revoke", (*handler).revoke},
	{"GET", "/v1/operator/me/nodes", (*handler).operatorNodes},
	{"GET", "/v1/operator/me/credits", operatorView((*registry.Service).CreditsView)},
	{"GET", "/v1/operator/me/evidence", operatorView((*registry.Service).EvidenceView)},
	{"POST", "/v1/bindings/initiate", (*handler).initiate},
	{"POST", "/v1/bindings/resolve", (*handler).resolve},
	{"POST", "/v1/bindings/authorize", (*handler).authorize},
	{"GET", "/v1/bindings/{id}/status", (*handler).status},
	{"POST", "/v1/bindings/{id}/cancel", (*handler).cancel},
	{"POST", "/v1/bindings/{id}/reject", (*handler).operatorReject},
	{"POST", "/v1/bindings/{id}/unbind", (*handler).unbind},
	{"POST", "/v1/node/bindings/pending", (*handler).pending},
	{"POST", "/v1/node/bindings/{id}/accept", (*handler).accept},
	{"POST", "/v1/node/bindings/{id}/reject", (*handler).nodeReject},
	{"GET", "/openapi.json", (*handler).openapi},
	{"GET", "/log/checkpoint", (*handler).logCheckpoint},
	{"GET", "/log/key", (*handler).logKey},
	{"GET", "/log/tile/{tile}", (*handler).logTile},
	// The live network's node script posts to the unversioned paths.
	{"POST", "/register", (*handler).register},
	{"POST", "/heartbeat", (*handler).heartbeat},
	{"GET", "/metrics", (*handler).metrics},
}

// New returns the whole HTTP API of the registry s (docs/protocol.md section 5), as an
// http.Handler that another Go service can mount. Paths the description marks Planned
// (/v1/oracle/*, /v1/dex/*) and every other unknown path answer 404 with a JSON error; a known
// path with the wrong method answers 405, and OPTIONS on a known path answers 204 with its
// Allow header (and the CORS headers of [WithCORSOrigins]).
func New(s *registry.Service, opts ...Option) http.Handler {
	h := &handler{s: s, log: s.Logger(), opts: options{addressHeader: HeaderXForwardedFor}}
	for _, o := range opts {
		o(&h.opts)
	}
	return h.logged(h.cors(h))
}

type handler struct {
	s    *registry.Service
	log  *slog.Logger // the service's
	opts options
	// internalLog and unavailableLog pass the lines of 500s and 503s in bursts, and outage
	// says when the store is back (outage.go).
	internalLog, unavailableLog burstLog
	outage                      outage
}

// ServeHTTP serves r with the endpoint it names: 404 when its path is no endpoint's, 405
// with the Allow header when the path is known but not with this method.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			h.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path)
			h.fail(w, errors.New("panic"))
		}
	}()
	addr := h.clientAddr(r)
	if err := h.s.RefuseMalformed(addr); err != nil {
		// Refused before the body is read; closing makes the sender connect again.
		w.Header().Set("Connection", "close")
		h.fail(w, err)
		return
	}
	sw, _ := w.(*statusWriter)
	if sw != nil {
		defer func() {
			if meteredAsMalformed(sw) {
				h.s.CountMalformed(addr)
			}
		}()
	}
	known := false
	for i := range endpoints {
		e := &endpoints[i]
		id, ok := matchTemplate(e.path, r.URL.Path)
		if !ok {
			continue
		}
		if e.method == r.Method {
			if sw != nil {
				sw.route = e.path
			}
			e.serve(h, w, r, call{id: id, addr: addr})
			return
		}
		known = true
	}
	if !known {
		h.fail(w, proto.New(proto.NotFound, "no such endpoint"))
		return
	}
	w.Header().Set("Allow", allowOf(r.URL.Path))
	h.fail(w, proto.New(proto.MethodNotAllowed, "method not allowed on this endpoint"))
}

// knownPath reports whether path is an endpoint of the API, whatever the method.
func knownPath(path string) bool { return routeOf(path) != "" }

// routeOf returns the template of the endpoint path is an instance of, or "".
func routeOf(path string) string {
	for _, e := range endpoints {
		if _, ok := matchTemplate(e.path, path); ok {
			return e.path
		}
	}
	return ""
}

// allowOf returns the Allow header of a known path: its methods, and OPTIONS.
func allowOf(path string) string {
	var methods []string
	for _, e := range endpoints {
		if _, ok := matchTemplate(e.path, path); ok && !slices.Contains(methods, e.method) {
			methods = append(methods, e.method)
		}
	}
	return strings.Join(append(methods, http.MethodOptions), ", ")
}

// matchTemplate reports whether path is an instance of the endpoint template tmpl, where
// {id} matches one non-empty segment and {tile}, last, the non-empty rest of the path, and
// returns what they matched.
func matchTemplate(tmpl, path string) (id string, ok bool) {
	for {
		if tmpl == "{tile}" {
			return path, path != ""
		}
		t, tRest, tMore := strings.Cut(tmpl, "/")
		p, pRest, pMore := strings.Cut(path, "/")
		if tMore != pMore {
			return "", false
		}
		switch {
		case t == "{id}" && p != "":
			id = p
		case t != p:
			return "", false
		}
		if !tMore {
			return id, true
		}
		tmpl, path = tRest, pRest
	}
}

// reply writes a successful answer, or the error.
func (h *handler) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// fail writes err as {code, error} with the status of its code. The text sent is that of the
// coded error itself (proto.Text): the context a use case wraps around it is for the log.
// Errors that carry no code are internal: their text is logged, never sent.
func (h *handler) fail(w http.ResponseWriter, err error) {
	code := proto.CodeOf(err)
	status, ok := statusOf[code]
	msg := proto.Text(err)
	switch {
	case !ok || code == proto.Internal:
		h.internalLog.log(h.log, slog.LevelError, "internal error", "err", err)
		code, status, msg = proto.Internal, http.StatusInternalServerError, "internal error"
	case code == proto.StoreUnavailable:
		h.unavailableLog.log(h.log, slog.LevelWarn, "store unavailable: requests answered 503", "err", err)
		h.outage.refusedWrite()
		w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
	}
	if wait := budget.RetryAfter(err); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.code, sw.limit = code, budget.LimitOf(err)
	}
	writeJSON(w, status, api.ErrorBody{Code: string(code), Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := answerBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			answerBuffers.Put(buf)
		}
	}()
	buf.Reset()
	// Encode ends the value with the newline every answer ends with.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"code":"INTERNAL","error":"internal error"}` + "\n")
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// answerBuffers hold JSON answers while they are written, so that the requests every node
// sends (heartbeats) allocate no buffer of their own. A buffer grown past maxPooledAnswer by
// a large answer is dropped, so that the pool does not keep the largest answer's memory.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledAnswer = 16 << 10

// The values of headers set on most answers, shared: net/http only reads a header's values,
// and a shared slice saves an allocation on every answer.
var (
	contentTypeJSON     = []string{"application/json"}
	contentEncodingGzip = []string{"gzip"}
	varyAcceptEncoding  = []string{"Accept-Encoding"}
	noSniff             = []string{"nosniff"}
)

// body reads a request body of at most MaxBodyBytes.
func body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, proto.New(proto.PayloadTooLarge, "request body is over 64 KiB")
	}
	if err != nil {
		return nil, proto.New(proto.BadRequest, "request body could not be read")
	}
	return b, nil
}

// handle answers a request with a JSON body: it reads the body and decodes it with dec,
// before any other check (docs/protocol.md §5.0), then runs use and replies with its result or
// its error.
func handle[T, R any](h *handler, w http.ResponseWriter, r *http.Request, dec func([]byte) (T, error), use func(context.Context, T) (R, error)) {
	b, err := body(w, r)
	if err == nil {
		var req T
		if req, err = dec(b); err == nil {
			var res R
			if res, err = use(r.Context(), req); err == nil {
				writeJSON(w, http.StatusOK, res)
				return
			}
		}
	}
	h.fail(w, err)
}

func (h *handler) openapi(w http.ResponseWriter, _ *http.Request, _ call) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
	w.Write(openAPI)
}

// health keeps the protocol's shape ({status, service, count}) and adds `store` when the
// store watches a disk. A store that refuses writes turns status to "degraded": reads are
// still served, so the answer stays 200 and a client reading only status and count still
// parses it.
func (h *handler) health(w http.ResponseWriter, r *http.Request, _ call) {
	n, err := h.s.NodeCount(r.Context())
	st := h.s.StoreHealth()
	status := "ok"
	if st.State != "" && st.State != store.HealthOK {
		status = "degraded"
	}
	h.reply(w, struct {
		Status  string `json:"status"`
		Service string `json:"service"`
		Count   int    `json:"count"`
		Store   string `json:"store,omitempty"`
	}{status, "svrpd", n, st.State}, err)
}

func (h *handler) register(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeRegister, func(ctx context.Context, req api.RegisterRequest) (api.RegisterResult, error) {
		return h.s.Register(ctx, req, c.addr)
	})
}

func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeHeartbeat, func(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResult, error) {
		return h.s.Heartbeat(ctx, req, c.addr)
	})
}

func (h *handler) challenge(w http.ResponseWriter, r *http.Request, _ call) {
	// Any or no body: it is read (within the limit) and ignored.
	if _, err := body(w, r); err != nil {
		h.fail(w, err)
		return
	}
	res, err := h.s.Challenge()
	h.reply(w, res, err)
}

func (h *handler) deviceLogin(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeLogin, func(ctx context.Context, l authn.Login) (api.LoginResult, error) {
		return h.s.Login(ctx, l, c.addr)
	})
}

func (h *handler) logout(w http.ResponseWriter, r *http.Request, _ call) {
	// Any or no body: it is read (within the limit) and ignored; the bearer is the request.
	if _, err := body(w, r); err != nil {
		h.fail(w, err)
		return
	}
	res, err := h.s.Logout(r.Context(), r.Header.Get("Authorization"))
	h.reply(w, res, err)
}

func (h *handler) revoke(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeRevocation, func(ctx context.Context, rev authn.SignedRevocation) (api.RevokeResult, error) {
		return h.s.Revoke(ctx, rev, c.addr)
	})
}

// operator authenticates the bearer of r.
func (h *handler) operator(r *http.Request) (authn.Operator, error) {
	return h.s.Authenticate(r.Context(), r.Header.Get("Authorization"))
}

func (h *handler) operatorNodes(w http.ResponseWriter, r *http.Request, _ call) {
	op, err := h.operator(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	q := r.URL.Query()
	f, err := api.ParseNodeFilter(q)
	var p api.Page
	var after *answers.Cursor
	if err == nil {
		p, after, err = h.s.ListingPage(q, 0)
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	res, err := h.s.BoundNodes(r.Context(), op, f)
	if err != nil {
		h.fail(w, err)
		return
	}
	if p.Paged() {
		res = answers.PageBound(res, p, after)
	}
	if res.Next != "" {
		w.Header().Set("Link", nextLink(r, res.Next))
	}
	b, err := json.Marshal(res)
	if err != nil {
		h.fail(w, err)
		return
	}
	serveSmall(w, r, append(b, '\n'))
}

// operatorView serves a view that asks nothing of a request but the operator its bearer
// names.
func operatorView[V any](view func(*registry.Service, authn.Operator) V) func(*handler, http.ResponseWriter, *http.Request, call) {
	return func(h *handler, w http.ResponseWriter, r *http.Request, _ call) {
		op, err := h.operator(r)
		if err != nil {
			h.fail(w, err)
			return
		}
		h.reply(w, view(h.s, op), nil)
	}
}

func (h *handler) initiate(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeInitiate, func(ctx context.Context, req binding.InitiateRequest) (api.InitiateResult, error) {
		return h.s.Initiate(ctx, req, c.addr)
	})
}

func (h *handler) resolve(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeResolve, func(ctx context.Context, req api.ResolveRequest) (api.ResolveView, error) {
		op, err := h.operator(r)
		if err != nil {
			return api.ResolveView{}, err
		}
		return h.s.Resolve(ctx, op, req, c.addr)
	})
}

func (h *handler) authorize(w http.ResponseWriter, r *http.Request, _ call) {
	handle(h, w, r, api.DecodeAuthorize, func(ctx context.Context, req api.AuthorizeRequest) (api.StateResult, error) {
		op, err := h.operator(r)
		if err != nil {
			return api.StateResult{}, err
		}
		return h.s.Authorize(ctx, op, req)
	})
}

func (h *handler) status(w http.ResponseWriter, r *http.Request, c call) {
	res, err := h.s.SessionStatus(r.Context(), c.id)
	h.reply(w, res, err)
}

// cancel, operatorReject and unbind hand the bearer and the body over as received: the
// service picks the form (registry.Service.CancelBy).
func (h *handler) cancel(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, asIs, func(ctx context.Context, b []byte) (api.StateResult, error) {
		return h.s.CancelBy(ctx, c.id, r.Header.Get("Authorization"), b)
	})
}

func (h *handler) operatorReject(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, asIs, func(ctx context.Context, _ []byte) (api.StateResult, error) {
		return h.s.RejectBy(ctx, c.id, r.Header.Get("Authorization"))
	})
}

func (h *handler) unbind(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, asIs, func(ctx context.Context, b []byte) (api.UnbindResult, error) {
		return h.s.UnbindBy(ctx, c.id, r.Header.Get("Authorization"), b)
	})
}

// asIs is the decoder of a request whose form the service picks from its parts.
func asIs(b []byte) ([]byte, error) { return b, nil }

func (h *handler) pending(w http.ResponseWriter, r *http.Request, _ call) {
	handle(h, w, r, api.DecodePending, h.s.Pending)
}

func (h *handler) accept(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, api.DecodeAcceptance, func(ctx context.Context, acc binding.Acceptance) (api.AcceptResult, error) {
		return h.s.Accept(ctx, c.id, acc)
	})
}

func (h *handler) nodeReject(w http.ResponseWriter, r *http.Request, c call) {
	handle(h, w, r, asIs, func(ctx context.Context, b []byte) (api.StateResult, error) {
		return h.s.NodeRejectBy(ctx, c.id, r.Header.Get("Authorization"), b)
	})
}

// statusWriter remembers the status a handler wrote, and the protocol code of an error
// answer, for the request log and the observer.
type statusWriter struct {
	http.ResponseWriter
	status int
	code   proto.Code
	limit  string
	route  string // the endpoint template that served the request, when one did
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// logged logs one line per request: method, path, status and duration, and hands the
// exchange to the observer; it marks every answer nosniff. It logs no header, query or
// body, so no token or code can reach the log.
func (h *handler) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// Every answer is JSON or plain text, never something a browser should guess at:
		// an error echoing nothing of the request still must not be sniffed as HTML.
		w.Header()["X-Content-Type-Options"] = noSniff
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		// Checked first, since building the line's attributes costs allocations even when
		// the level is off, as it is on a busy public registry.
		if h.log.Enabled(r.Context(), slog.LevelDebug) {
			h.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", took)
		}
		h.outage.after(h.s)
		if h.opts.observe != nil {
			route := sw.route
			if route == "" {
				route = routeOf(r.URL.Path)
			}
			if route == "" {
				route = RouteUnknown
			}
			h.opts.observe(Exchange{Method: r.Method, Route: route, Status: sw.status, Code: sw.code, Limit: sw.limit, Duration: took})
		}
	})
}
