// Package daemon is svrpd's composition root: it turns a Config into a store, a registry
// service and an HTTP server, runs the service's upkeep ([registry.Service.Run]) beside them
// and shuts all of it down in order. It holds no protocol logic of its own; that is in registry
// and the packages below it (see docs/protocol.md).
package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/internal/metrics"
	"github.com/svrp/svrp/internal/move"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/store/postgres"
)

// debugHandler serves Go's profiler: the index, each named profile (heap, goroutine, ...),
// the CPU profile, the execution trace and symbol lookup; and the store's backup, which
// holds every record of the registry and so belongs on this loopback listener, off by
// default, and nowhere else. The command line is left out: it may carry a database URL with
// its password. Importing net/http/pprof also registers these handlers on
// http.DefaultServeMux, which svrpd never serves.
func debugHandler(backup http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+move.BackupPath, backup)
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	return mux
}

// ParseLevel reads --log-level: trace (Badger's own debug messages too), debug (one line
// per request), info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	if strings.EqualFold(s, "trace") {
		return badger.LevelTrace, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", s)
	}
	return l, nil
}

func NewLogger(w io.Writer, level, format string) *slog.Logger {
	l, _ := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey && a.Value.Any() == badger.LevelTrace {
			a.Value = slog.StringValue("TRACE")
		}
		return a
	}}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ParseDiskReserve reads --disk-reserve: "auto" (or empty) for the default, a size such as
// 512MiB, 2GiB or 300MB (a bare number is bytes), or a percentage of the volume such as 10%.
func ParseDiskReserve(s string) (badger.DiskReserve, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "auto" {
		return badger.DiskReserve{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f >= 100 {
			return badger.DiskReserve{}, fmt.Errorf("--disk-reserve %q: want a percentage above 0 and below 100", s)
		}
		return badger.DiskReserve{Percent: f}, nil
	}
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := s, uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || n > (1<<62)/mult {
		return badger.DiskReserve{}, fmt.Errorf("--disk-reserve %q: want auto, a size such as 512MiB or 2GiB, or a percentage such as 10%%", s)
	}
	return badger.DiskReserve{Bytes: n * mult}, nil
}

// MetricsOnMain is the --metrics-listen value that serves GET /metrics on the API's own
// listener, the default: a registry's operator can scrape it with nothing more to open.
// An address of its own keeps the metrics off a public listener.
const MetricsOnMain = "main"

// HTTP server timeouts: a client that trickles its headers or body is cut off.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 60 * time.Second
	// idleTimeout is how long a keep-alive connection may wait for its next request: long
	// enough for a client's next call in a sequence (login, then resolve), short enough
	// that idle connections do not pile up against the connection cap.
	idleTimeout    = 30 * time.Second
	maxHeaderBytes = 16 << 10
	// DefaultShutdownTimeout bounds a shutdown: long enough to drain requests (bounded by
	// the write timeout's order of magnitude) and to let Badger write out its memtables.
	DefaultShutdownTimeout = 30 * time.Second
	// drainShare is the part of the shutdown bound given to draining requests; the rest is
	// the store's.
	drainShare = 2
)

// Timeouts are the HTTP server's bounds on a client.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

func (t Timeouts) orDefaults() Timeouts {
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&t.ReadHeader, readHeaderTimeout}, {&t.Read, readTimeout}, {&t.Write, writeTimeout}, {&t.Idle, idleTimeout}} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return t
}

// fixedLimits names, in serve's usage, the bounds no flag changes.
var fixedLimits = fmt.Sprintf("Fixed limits: request bodies %d KiB; %d failed resolves per code per %d minutes; %d open binding sessions per node key; registration signatures %d bytes; keep-alive connections idle %d s.",
	httpapi.MaxBodyBytes>>10, binding.ResolveFailureLimit, int(binding.ResolveWindow/time.Minute), binding.MaxOpenSessionsPerNode,
	limits.MaxSignatureBytes, int(idleTimeout/time.Second))

// Main is "svrpd serve": it parses the flags (and their SVRPD_ variables), serves until ctx is
// done and returns the exit code: 0 after a clean shutdown, 1 after a failure, 2 after a usage
// error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c Config
	fs := cmdflag.New("serve", stderr)
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to serve HTTP on (host:port; port 0 picks a free one)")
	fs.StringVar(&c.DataDir, "data", "./svrpd-data", "directory of the embedded Badger store")
	fs.BoolVar(&c.Memory, "memory", false, "keep everything in memory (lost at exit) instead of in --data")
	fs.StringVar(&c.Postgres, "postgres", "", "PostgreSQL URL (postgres://user@host:5432/db): keep everything there, shared with every svrpd on that database, instead of in --data")
	fs.DurationVar(&c.FlushEvery, "flush-every", registry.DefaultFlushEvery, "how often heartbeat times kept in memory are written to the store, in one statement per flush")
	fs.StringVar(&c.Prefix, "prefix", canonical.DefaultPrefix, `domain prefix of every signed message ("libertynet" speaks to the live network's clients)`)
	fs.BoolVar(&c.StrictSignatures, "strict-signatures", false, "refuse registrations whose signature does not verify (turns grace mode off)")
	fs.StringVar(&c.LogOrigin, "log-origin", "", "the transparency log's origin, the name of its key, such as registry.example/log; default <prefix>.svrp/log/<16 hex of the key>. Keep it once clients pinned the key")
	fs.Var(notFlag{&c.SingleVerify}, "batch-verify", batchVerifyUsage)
	limitFlags(fs, &c.Limits)
	fs.IntVar(&c.MaxConnections, "max-connections", DefaultMaxConnections, "open connections in total (lowered to what the file limit allows)")
	fs.IntVar(&c.MaxConnectionsPerAddress, "max-connections-per-address", DefaultMaxConnectionsPerAddress, "open connections per client address (IPv6: per /64)")
	fs.Var(prefixList{&c.TrustedProxies}, "trusted-proxy", "a proxy's address range (CIDR) whose --client-address-header names the client; repeatable, or comma-separated in SVRPD_TRUSTED_PROXY")
	c.Edge.flags(fs)
	fs.DurationVar(&c.SweepEvery, "sweep-every", registry.DefaultSweepEvery, "how often expired sessions and counters are swept")
	fs.StringVar(&c.LogLevel, "log-level", "info", "trace, debug, info, warn or error (debug logs every request; trace adds Badger's own messages)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	reserve := fs.String("disk-reserve", "auto", "free space kept on the data volume; writes answer 503 STORE_UNAVAILABLE below it (auto: the larger of 256MiB and 5% of the volume; or a size such as 1GiB, or a percentage such as 10%)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "bound on a shutdown (draining requests, closing the store); past it, or if the store cannot close, svrpd exits 1")
	fs.BoolVar(&c.Console, "console", true, "serve the operator console in the browser under /console/ (--console=false turns it off)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", MetricsOnMain, `where to serve GET /metrics (Prometheus): "main" on --listen's address, a host:port of its own, or "" for nowhere`)
	fs.StringVar(&c.DebugListen, "debug-listen", "", "serve Go's profiler (/debug/pprof/) and the store's backup (GET /backup, for svrpd backup --daemon) on this loopback host:port of its own; loopback only (default: off)")
	fs.Func("cors-origin", "let browser pages of this `origin` (scheme://host[:port]) call the API; repeatable or comma-separated (default none)", appendList(&c.CORSOrigins))
	tlsFlags(fs, &c)
	postgresFlags(fs, &c)
	cmdflag.SetUsage(fs, "Usage: svrpd serve [flags]",
		"Every flag can also be set by an environment variable: SVRPD_ and its name in upper case, '-' as '_' (SVRPD_LISTEN, SVRPD_DATA, ...). A flag on the command line wins.",
		fixedLimits)
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	var err error
	if c.DiskReserve, err = ParseDiskReserve(*reserve); err != nil {
		fmt.Fprintf(stderr, "svrpd: %v\n", err)
		return 2
	}
	c.dataGiven = cmdflag.IsSet(fs, "data")
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "svrpd: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nsvrpd: "))
		return 2
	}
	log := NewLogger(stderr, c.LogLevel, c.LogFormat)
	if err := Run(ctx, c, log, nil); err != nil {
		var se startError
		if errors.As(err, &se) {
			log.Error("svrpd cannot start", "err", se.err)
		} else {
			log.Error("svrpd stopped", "err", err)
		}
		return 1
	}
	return 0
}

// startError is a failure before serving: the address or the data directory.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }

// Run runs the registry until ctx is done, then shuts down in order, within
// c.ShutdownTimeout: stop accepting, drain requests, stop the upkeep, close the store. It
// binds the listener before it touches the disk, so that a daemon that cannot listen leaves
// no directory behind. ready, when not nil, receives the listening address once requests
// can be served.
//
// It returns an error when the shutdown overran its bound or the store could not close;
// what could not be made durable is in the error, and was logged.
func Run(ctx context.Context, c Config, log *slog.Logger, ready chan<- string) error {
	c = c.WithDefaults()
	maxConns, perAddr := c.MaxConnections, c.MaxConnectionsPerAddress
	files, err := raiseFileLimit()
	if err != nil {
		log.Warn("could not raise the open-file limit", "err", err, "limit", files)
	}
	if files > 0 && uint64(maxConns)+fdReserve > files {
		maxConns = max(1, int(files)-fdReserve)
		log.Warn("connection cap lowered to fit the open-file limit", "max_connections", maxConns, "file_limit", files)
	}
	tcp, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return startError{err}
	}
	defer tcp.Close()
	var m *metrics.Metrics
	var metricsLn net.Listener
	metricsOnMain := c.MetricsListen == MetricsOnMain || c.MetricsListen == c.Listen
	if c.MetricsListen != "" {
		// A registry of its own, not Prometheus's global one: nothing outside this daemon
		// registers on it, and two daemons in one process count apart.
		m = metrics.New(prometheus.NewRegistry())
		if !metricsOnMain {
			if metricsLn, err = net.Listen("tcp", c.MetricsListen); err != nil {
				return startError{fmt.Errorf("--metrics-listen: %w", err)}
			}
			defer metricsLn.Close()
		}
	}
	var debugLn net.Listener
	if c.DebugListen != "" {
		if debugLn, err = net.Listen("tcp", c.DebugListen); err != nil {
			return startError{fmt.Errorf("--debug-listen: %w", err)}
		}
		defer debugLn.Close()
	}
	fr, err := newFront(ctx, c, log)
	if err != nil {
		return startError{err}
	}
	defer fr.close()
	st, inner, pg, err := openStore(ctx, c, log, m)
	if err != nil {
		return startError{err}
	}
	closeStore := func() error {
		if err := st.Close(); err != nil {
			return err
		}
		log.Info("store closed")
		return nil
	}

	rc := registry.Config{
		Store: st, Prefix: c.Prefix, Logger: log, StrictSignatures: c.StrictSignatures, LogOrigin: c.LogOrigin,
		Limits: c.Limits, FlushEvery: c.FlushEvery, SweepEvery: c.SweepEvery,
	}
	if m != nil {
		rc.FlushObserver = m.Flush
	}
	var stopVerifier func()
	rc.Verifier, stopVerifier = newVerifier(c)
	defer stopVerifier()
	if pg != nil {
		// Daemons on one database share the challenge key, kept there, and record consumed
		// challenges there: a challenge from any of them is accepted by any, once.
		key, err := pg.Secret(ctx, challengeKeyName)
		if err != nil {
			return errors.Join(startError{err}, closeStore())
		}
		rc.Challenges = authn.NewChallenger(key, rand.Reader, 0)
		rc.ChallengesInStore = true
	}
	svc, err := registry.New(rc)
	if err != nil {
		return errors.Join(err, closeStore())
	}
	if _, err := svc.RepairAtStart(ctx); errors.Is(err, store.ErrUnavailable) {
		// The store refuses writes (it said why, once); the sessions left VERIFYING are
		// repaired at the next start with room.
		log.Warn("sessions left verifying were not repaired: the store refuses writes")
	} else if err != nil {
		return errors.Join(fmt.Errorf("repairing sessions at start: %w", err), closeStore())
	}

	clientAddress, err := c.Edge.option(c.TrustedProxies)
	if err != nil {
		return errors.Join(err, closeStore())
	}
	opts := []httpapi.Option{httpapi.WithCORSOrigins(c.CORSOrigins...), clientAddress}
	if m != nil {
		m.WatchService(svc)
		opts = append(opts, httpapi.WithObserver(m.Observe))
		if metricsOnMain {
			opts = append(opts, httpapi.WithMetrics(m.Handler()))
		}
	}
	handler := httpapi.New(svc, opts...)
	if c.Console {
		handler = console.Mount(handler, c.Prefix)
	}

	ln := newLimitListener(tcp, maxConns, perAddr, c.TrustedProxies)
	ln.blockFactor, ln.grace, ln.refusalDelay = c.Limits.AddressBlockFactor, c.Edge.RequestGrace, c.Edge.RefusalDelay
	ln.sendFloor, ln.sendTimeout, ln.lifetime = c.Edge.SendFloor, c.Edge.SendTimeout, c.Edge.ConnectionLifetime
	ln.log = log
	fair := newFairness(perAddr, perAddr*max(c.Limits.AddressBlockFactor, 1), maxConns, handlerTurns())
	timeouts := c.Timeouts.orDefaults()
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: timeouts.ReadHeader,
			ReadTimeout:       timeouts.Read,
			WriteTimeout:      timeouts.Write,
			IdleTimeout:       timeouts.Idle,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			HTTP2:             http2Bounds(c.Edge.SendTimeout),
		}
	}
	srv := newServer(ln.delivered(fair.serve(handler)))
	srv.ConnState, srv.ConnContext = ln.connState, ln.connContext
	served := make(chan error, 4)
	go func() { served <- fr.serve(srv, ln) }()
	fr.startRedirect(ln.Addr(), newServer, served)
	metricsAt := ""
	var metricsSrv *http.Server
	switch {
	case metricsLn != nil:
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		metricsSrv = newServer(mux)
		go func() { served <- metricsSrv.Serve(metricsLn) }()
		metricsAt = "http://" + metricsLn.Addr().String() + "/metrics"
	case m != nil:
		metricsAt = fr.scheme() + "://" + ln.Addr().String() + "/metrics"
	}
	var debugSrv *http.Server
	if debugLn != nil {
		// No read or write bound but the headers': a CPU profile or a trace answers only
		// after the seconds it was asked to run.
		debugSrv = &http.Server{
			Handler: debugHandler(move.BackupHandler(st, inner)), ReadHeaderTimeout: timeouts.ReadHeader, MaxHeaderBytes: maxHeaderBytes,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		go func() { served <- debugSrv.Serve(debugLn) }()
	}

	upkeepCtx, stopUpkeep := context.WithCancel(context.WithoutCancel(ctx))
	upkept := make(chan error, 1)
	go func() { upkept <- svc.Run(upkeepCtx) }()

	where := "badger " + c.DataDir
	switch {
	case c.Memory:
		where = "memory"
	case pg != nil:
		where = "postgres"
	}
	consoleURL := "off"
	if c.Console {
		consoleURL = fr.scheme() + "://" + ln.Addr().String() + console.Path
	}
	attrs := []any{"addr", fr.scheme() + "://" + ln.Addr().String(), "store", where, "prefix", c.Prefix, "strict_signatures", c.StrictSignatures, "batch_verify", !c.SingleVerify, "max_connections", maxConns, "file_limit", files, "console", consoleURL, "metrics", metricsAt}
	if debugLn != nil {
		attrs = append(attrs, "pprof", "http://"+debugLn.Addr().String()+"/debug/pprof/")
	}
	// The transparency log's key, which clients pin: made with the store the first time and
	// kept there. A store that refuses writes at the first start makes it at the first
	// request that needs it.
	if k, err := svc.LogKey(ctx); err != nil {
		log.Warn("the transparency log's key is not made yet", "err", err)
	} else {
		attrs = append(attrs, "log_key", k.Verifier())
	}
	log.Info("svrpd serving", attrs...)
	if ready != nil {
		ready <- ln.Addr().String()
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining requests")
	case serveErr = <-served:
		log.Error("http server failed", "err", serveErr)
	}
	bound := c.ShutdownTimeout
	if bound <= 0 {
		bound = DefaultShutdownTimeout
	}
	deadline := time.Now().Add(bound)
	drainCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), time.Now().Add(bound/drainShare))
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Warn("requests still open at the drain deadline", "err", err)
		srv.Close()
	}
	fr.close()
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	if debugSrv != nil {
		debugSrv.Close()
	}
	stopUpkeep()
	// The upkeep may be inside a write that a failing disk holds up, and ends with a last
	// flush; it gets the rest of the bound, shared with closing the store.
	closed := make(chan error, 1)
	go func() {
		if err := <-upkept; err != nil && !errors.Is(err, store.ErrUnavailable) {
			log.Warn("the last heartbeat times were not made durable by the upkeep; closing the store tries again", "err", err)
		}
		log.Info("upkeep stopped")
		closed <- closeStore()
	}()
	select {
	case err := <-closed:
		if err != nil {
			log.Error("the store could not close", "err", err)
			return errors.Join(serveErr, fmt.Errorf("closing the store: %w", err))
		}
		return serveErr
	case <-time.After(time.Until(deadline)):
		err := fmt.Errorf("the store did not close within the %v shutdown bound: Badger's memtables were not written out as tables, and the last_seen of heartbeats since the last flush (at most %v) may be lost; every other acknowledged write is in Badger's write-ahead log, replayed at the next start", bound, c.FlushEvery)
		log.Error("shutdown overran", "err", err)
		return errors.Join(serveErr, err)
	}
}

// openStore opens the configured store and puts the node table in memory in front of it, so
// that heartbeats and node listings are served from memory with the store as the durable copy.
// It also returns the store behind the node cache, for a backup, and with --postgres the
// PostgreSQL store itself, for what only it offers.
func openStore(ctx context.Context, c Config, log *slog.Logger, m *metrics.Metrics) (store.Store, store.Store, *postgres.Store, error) {
	var inner store.Store
	var pg *postgres.Store
	switch {
	case c.Memory:
		inner = store.NewMemory()
	case c.Postgres != "":
		p, err := postgres.Open(ctx, c.Postgres, c.postgresOptions()...)
		if err != nil {
			return nil, nil, nil, err
		}
		inner, pg = p, p
		if m != nil {
			m.CountStatements(p.Statements)
		}
	default:
		abs, err := filepath.Abs(c.DataDir)
		if err != nil {
			return nil, nil, nil, err
		}
		opts := []badger.Option{badger.WithLogger(log), badger.WithDiskReserve(c.DiskReserve)}
		if m != nil {
			opts = append(opts, badger.WithCommitObserver(m.Commit))
		}
		st, err := badger.Open(abs, opts...)
		switch {
		case errors.Is(err, badger.ErrNoSpace), errors.Is(err, badger.ErrReadOnly),
			errors.Is(err, badger.ErrLocked), errors.Is(err, badger.ErrNotDataDir):
			return nil, nil, nil, fmt.Errorf("data directory %w", err)
		case err != nil:
			return nil, nil, nil, fmt.Errorf("opening the store in %s: %w", abs, err)
		}
		inner = st
	}
	start := time.Now()
	st, err := store.WithNodeCache(ctx, inner)
	if err != nil {
		inner.Close()
		return nil, nil, nil, fmt.Errorf("loading the node table: %w", err)
	}
	var n int
	st.View(ctx, func(tx store.Tx) (err error) { n, err = tx.NodeCount(); return err })
	// Reading a large table leaves behind as much garbage as it keeps; give it back to the
	// system now rather than whenever the scavenger gets to it.
	debug.FreeOSMemory()
	log.Info("node table loaded", "nodes", n, "took", time.Since(start).Round(time.Millisecond))
	return st, inner, pg, nil
}

// challengeKeyName names the login challenge key in a shared store.
const challengeKeyName = "login-challenge-key"
