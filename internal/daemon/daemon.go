// Package daemon is svrpd's composition root: it turns a Config into a store, a registry
// service and an HTTP server, runs the background upkeep (heartbeat flushes and sweeps) and
// shuts all of it down in order. It holds no protocol logic of its own; that is in registry
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
	"net/netip"
	"net/url"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/internal/metrics"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// Config is everything `svrpd serve` is configured with.
type Config struct {
	Listen   string // host:port; port 0 picks a free one
	DataDir  string // the Badger directory, unless Memory
	Memory   bool   // keep everything in memory: nothing survives a restart
	Postgres string // a PostgreSQL URL: the store shared with other daemons
	// FlushEvery is how often heartbeat times kept in memory are written to the store.
	FlushEvery           time.Duration
	Prefix               string // domain prefix of every signed message
	StrictSignatures     bool   // refuse registrations whose signature does not verify
	SingleVerify         bool   // verify each signature alone, not in batches (--batch-verify=false)
	ResolveAddressLimit  int
	RegisterAddressLimit int
	MaxNodes             int
	MaxRevocations       int
	RevokeAddressLimit   int
	// The abuse bounds of registry/limits.go and connlimit.go.
	InitiateAddressLimit      int
	MaxBindingSessions        int
	MaxBearerSessions         int
	LoginAddressLimit         int
	MalformedAddressLimit     int
	InitiateKeyLimit          int
	LoginFailureAddressLimit  int
	LoginFailureOperatorLimit int
	ResolveOperatorLimit      int
	ResolveGlobalLimit        int
	MaxConnections            int
	MaxConnectionsPerAddress  int
	TrustedProxies            []netip.Prefix
	SweepEvery                time.Duration
	LogLevel                  string
	LogFormat                 string
	// DiskReserve is the free space kept on the data directory's volume; the zero value is
	// the store's default.
	DiskReserve store.DiskReserve
	// ShutdownTimeout bounds the shutdown after the first signal: draining requests and
	// closing the store. Zero is DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Console serves the operator console under /console/ (Main turns it on by default).
	Console bool
	// CORSOrigins are the browser origins allowed to call the API (--cors-origin).
	CORSOrigins []string
	// MetricsListen is where GET /metrics is served: MetricsOnMain (on Listen's
	// listener), a host:port of its own, or "" for nowhere.
	MetricsListen string
	// DebugListen is a loopback host:port where Go's profiler (net/http/pprof) is served
	// on a listener of its own, or "" for nowhere (the default).
	DebugListen string
	// dataGiven records that --data was set explicitly, which --memory contradicts.
	dataGiven bool
	// Timeouts is zero except in tests, which shorten the bounds to watch a slow client
	// being cut off; zero fields take the defaults below.
	Timeouts Timeouts
}

// WithDefaults returns c with every zero abuse bound set to its default, as the flags
// default them.
func (c Config) WithDefaults() Config {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&c.InitiateAddressLimit, registry.DefaultInitiateAddressLimit},
		{&c.MaxBindingSessions, registry.DefaultMaxOpenBindingSessions},
		{&c.MaxBearerSessions, registry.DefaultMaxBearerSessions},
		{&c.LoginAddressLimit, registry.DefaultLoginAddressLimit},
		{&c.LoginFailureAddressLimit, registry.DefaultLoginFailureAddressLimit},
		{&c.LoginFailureOperatorLimit, registry.DefaultLoginFailureOperatorLimit},
		{&c.ResolveOperatorLimit, registry.DefaultResolveOperatorLimit},
		{&c.ResolveGlobalLimit, registry.DefaultResolveGlobalLimit},
		{&c.MalformedAddressLimit, registry.DefaultMalformedAddressLimit},
		{&c.InitiateKeyLimit, registry.DefaultInitiateKeyLimit},
		{&c.MaxConnections, DefaultMaxConnections},
		{&c.MaxConnectionsPerAddress, DefaultMaxConnectionsPerAddress},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return c
}

func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want host:port", c.Listen))
	}
	if c.Postgres != "" && (c.Memory || c.dataGiven) {
		errs = append(errs, errors.New("--postgres keeps everything in the database, so --memory and --data cannot be used with it: --memory, --data and --postgres are mutually exclusive"))
	}
	if !c.Memory && c.Postgres == "" && c.DataDir == "" {
		errs = append(errs, errors.New("--data must name a directory (or use --memory or --postgres)"))
	}
	if c.FlushEvery < 0 || (c.FlushEvery > 0 && c.FlushEvery < 10*time.Millisecond) || c.FlushEvery > time.Minute {
		errs = append(errs, errors.New("--flush-every must be between 10ms and 1m"))
	}
	if c.Memory && c.dataGiven {
		errs = append(errs, errors.New("--memory keeps nothing on disk, so --data cannot be used with it: give one or the other"))
	}
	if c.MetricsListen != "" && c.MetricsListen != MetricsOnMain {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-listen %q: want host:port, %q (on --listen's address) or empty (no metrics)", c.MetricsListen, MetricsOnMain))
		}
	}
	if c.DebugListen != "" {
		if err := checkDebugListen(c.DebugListen); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			errs = append(errs, err)
		}
	}
	if err := canonical.CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("--prefix: %w", err))
	}
	if c.ResolveAddressLimit < 1 {
		errs = append(errs, errors.New("--resolve-address-limit must be at least 1"))
	}
	if c.RegisterAddressLimit < 1 {
		errs = append(errs, errors.New("--register-address-limit must be at least 1"))
	}
	// Zero takes the registry's default, so that a Config written before these bounds
	// existed still validates.
	if c.MaxNodes < 0 {
		errs = append(errs, errors.New("--max-nodes must be at least 1"))
	}
	if c.MaxRevocations < 0 {
		errs = append(errs, errors.New("--max-revocations must be at least 1"))
	}
	if c.RevokeAddressLimit < 0 {
		errs = append(errs, errors.New("--revoke-address-limit must be at least 1"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"initiate-address-limit", c.InitiateAddressLimit},
		{"max-binding-sessions", c.MaxBindingSessions},
		{"max-bearer-sessions", c.MaxBearerSessions},
		{"login-address-limit", c.LoginAddressLimit},
		{"login-failure-address-limit", c.LoginFailureAddressLimit},
		{"login-failure-operator-limit", c.LoginFailureOperatorLimit},
		{"resolve-operator-limit", c.ResolveOperatorLimit},
		{"resolve-global-limit", c.ResolveGlobalLimit},
		{"malformed-address-limit", c.MalformedAddressLimit},
		{"initiate-key-limit", c.InitiateKeyLimit},
		{"max-connections", c.MaxConnections},
		{"max-connections-per-address", c.MaxConnectionsPerAddress},
	} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", f.name))
		}
	}
	if c.SweepEvery < time.Second {
		errs = append(errs, errors.New("--sweep-every must be at least 1s"))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("--shutdown-timeout must not be negative"))
	}
	if c.DiskReserve.Percent < 0 || c.DiskReserve.Percent >= 100 {
		errs = append(errs, errors.New("--disk-reserve: a percentage must be below 100%"))
	}
	return errors.Join(errs...)
}

// prefixList is a repeatable flag of CIDR ranges; one value may also list several, separated
// by commas (as SVRPD_TRUSTED_PROXY does).
type prefixList struct{ p *[]netip.Prefix }

func (l prefixList) String() string {
	if l.p == nil {
		return ""
	}
	var parts []string
	for _, p := range *l.p {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (l prefixList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not an address range (CIDR) or an address", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		*l.p = append(*l.p, p.Masked())
	}
	return nil
}

// checkOrigin accepts an origin as browsers send it: http or https, a host, an optional
// port, and nothing else.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--cors-origin %q: want scheme://host[:port], such as https://console.example.net", o)
	}
	return nil
}

// checkDebugListen accepts only a loopback address for the profiler: anyone who reaches it
// can make the daemon spend its CPU profiling and tracing, and read its goroutines' stacks.
// A name other than localhost is refused even when it resolves to loopback, since what is
// checked is what is typed; an empty host would listen on every interface.
func checkDebugListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-listen %q: want a loopback host:port, such as 127.0.0.1:6060", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("--debug-listen %q: the profiler is served on loopback only (127.0.0.0/8, ::1 or localhost); reach it from elsewhere through an SSH tunnel", addr)
}

// debugHandler serves Go's profiler: the index, each named profile (heap, goroutine, ...),
// the CPU profile, the execution trace and symbol lookup. The command line is left out: it
// may carry a database URL with its password. Importing net/http/pprof also registers these
// handlers on http.DefaultServeMux, which svrpd never serves.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
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
		return store.LevelTrace, nil
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
		if a.Key == slog.LevelKey && a.Value.Any() == store.LevelTrace {
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
func ParseDiskReserve(s string) (store.DiskReserve, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "auto" {
		return store.DiskReserve{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f >= 100 {
			return store.DiskReserve{}, fmt.Errorf("--disk-reserve %q: want a percentage above 0 and below 100", s)
		}
		return store.DiskReserve{Percent: f}, nil
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
		return store.DiskReserve{}, fmt.Errorf("--disk-reserve %q: want auto, a size such as 512MiB or 2GiB, or a percentage such as 10%%", s)
	}
	return store.DiskReserve{Bytes: n * mult}, nil
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
	fs.DurationVar(&c.FlushEvery, "flush-every", flushEvery, "how often heartbeat times kept in memory are written to the store, in one statement per flush")
	fs.StringVar(&c.Prefix, "prefix", canonical.DefaultPrefix, `domain prefix of every signed message ("libertynet" speaks to the live network's clients)`)
	fs.BoolVar(&c.StrictSignatures, "strict-signatures", false, "refuse registrations whose signature does not verify (turns grace mode off)")
	fs.Var(notFlag{&c.SingleVerify}, "batch-verify", batchVerifyUsage)
	fs.IntVar(&c.ResolveAddressLimit, "resolve-address-limit", registry.DefaultResolveAddressLimit, "failed binding resolves per client address per 10 minutes before 429")
	fs.IntVar(&c.RegisterAddressLimit, "register-address-limit", registry.DefaultRegisterAddressLimit, "new node keys one client address may register per hour before 429")
	fs.IntVar(&c.MaxNodes, "max-nodes", registry.DefaultMaxNodes, "most node records the registry holds; new node keys beyond it get 429")
	fs.IntVar(&c.MaxRevocations, "max-revocations", registry.DefaultMaxRevocations, "credential revocations kept in all; when full, new ones get 429 (none is ever dropped)")
	fs.IntVar(&c.RevokeAddressLimit, "revoke-address-limit", registry.DefaultRevokeAddressLimit, "new credential revocations one client address may record per hour before 429")
	fs.IntVar(&c.InitiateAddressLimit, "initiate-address-limit", registry.DefaultInitiateAddressLimit, "binding initiates per client address per 10 minutes before 429")
	fs.IntVar(&c.MaxBindingSessions, "max-binding-sessions", registry.DefaultMaxOpenBindingSessions, "open binding sessions over all nodes before initiates get 429")
	fs.IntVar(&c.MaxBearerSessions, "max-bearer-sessions", registry.DefaultMaxBearerSessions, "live operator sessions over all operators before logins get 429")
	fs.IntVar(&c.LoginAddressLimit, "login-address-limit", registry.DefaultLoginAddressLimit, "login attempts per client address per 5 minutes before 429")
	fs.IntVar(&c.LoginFailureAddressLimit, "login-failure-address-limit", registry.DefaultLoginFailureAddressLimit, "failed logins per client address per 10 minutes before 429")
	fs.IntVar(&c.LoginFailureOperatorLimit, "login-failure-operator-limit", registry.DefaultLoginFailureOperatorLimit, "failed logins per operator DID per 10 minutes before 429 (for addresses that failed)")
	fs.IntVar(&c.ResolveOperatorLimit, "resolve-operator-limit", registry.DefaultResolveOperatorLimit, "failed binding resolves per operator per 10 minutes before 429")
	fs.IntVar(&c.ResolveGlobalLimit, "resolve-global-limit", registry.DefaultResolveGlobalLimit, "failed binding resolves over all clients per 10 minutes before 429")
	fs.IntVar(&c.InitiateKeyLimit, "initiate-key-limit", registry.DefaultInitiateKeyLimit, "binding initiates per node key per 10 minutes before 429")
	fs.IntVar(&c.MalformedAddressLimit, "malformed-address-limit", registry.DefaultMalformedAddressLimit, "malformed requests (400, 413) per client address per minute; beyond it the address gets 429 before its body is read")
	fs.IntVar(&c.MaxConnections, "max-connections", DefaultMaxConnections, "open connections in total (lowered to what the file limit allows)")
	fs.IntVar(&c.MaxConnectionsPerAddress, "max-connections-per-address", DefaultMaxConnectionsPerAddress, "open connections per client address (IPv6: per /64)")
	fs.Var(prefixList{&c.TrustedProxies}, "trusted-proxy", "a proxy's address range (CIDR) whose X-Forwarded-For / Forwarded names the client; repeatable, or comma-separated in SVRPD_TRUSTED_PROXY")
	fs.DurationVar(&c.SweepEvery, "sweep-every", time.Minute, "how often expired sessions and counters are swept")
	fs.StringVar(&c.LogLevel, "log-level", "info", "trace, debug, info, warn or error (debug logs every request; trace adds Badger's own messages)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	reserve := fs.String("disk-reserve", "auto", "free space kept on the data volume; writes answer 503 STORE_UNAVAILABLE below it (auto: the larger of 256MiB and 5% of the volume; or a size such as 1GiB, or a percentage such as 10%)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "bound on a shutdown (draining requests, closing the store); past it, or if the store cannot close, svrpd exits 1")
	fs.BoolVar(&c.Console, "console", true, "serve the operator console in the browser under /console/ (--console=false turns it off)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", MetricsOnMain, `where to serve GET /metrics (Prometheus): "main" on --listen's address, a host:port of its own, or "" for nowhere`)
	fs.StringVar(&c.DebugListen, "debug-listen", "", "serve Go's profiler (/debug/pprof/) on this loopback host:port of its own, for go tool pprof; loopback only (default: off)")
	fs.Func("cors-origin", "let browser pages of this `origin` (scheme://host[:port]) call the API; repeatable or comma-separated (default none)", func(v string) error {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.CORSOrigins = append(c.CORSOrigins, o)
			}
		}
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: svrpd serve [flags]")
		fmt.Fprintln(fs.Output(), "\nEvery flag can also be set by an environment variable: SVRPD_ and its name in upper case, '-' as '_' (SVRPD_LISTEN, SVRPD_DATA, ...). A flag on the command line wins.")
		fmt.Fprintln(fs.Output(), "\nFixed limits: request bodies 64 KiB; 5 failed resolves per code per 10 minutes; 16 open binding sessions per node key; registration signatures 256 bytes; keep-alive connections idle 30 s.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
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
// c.ShutdownTimeout: stop accepting, drain requests, stop the sweeper, close the store. It
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
	st, pg, err := openStore(ctx, c, log, m)
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
		Store: st, Prefix: c.Prefix, Logger: log, StrictSignatures: c.StrictSignatures,
		ResolveAddressLimit: c.ResolveAddressLimit, RegisterAddressLimit: c.RegisterAddressLimit,
		MaxRevocations: c.MaxRevocations, RevokeAddressLimit: c.RevokeAddressLimit,
		InitiateAddressLimit: c.InitiateAddressLimit, MaxOpenBindingSessions: c.MaxBindingSessions,
		MaxBearerSessions: c.MaxBearerSessions, LoginAddressLimit: c.LoginAddressLimit, LoginFailureAddressLimit: c.LoginFailureAddressLimit,
		LoginFailureOperatorLimit: c.LoginFailureOperatorLimit, ResolveOperatorLimit: c.ResolveOperatorLimit,
		ResolveGlobalLimit: c.ResolveGlobalLimit, MalformedAddressLimit: c.MalformedAddressLimit,
		InitiateKeyLimit: c.InitiateKeyLimit, TrustedProxies: c.TrustedProxies, MaxNodes: c.MaxNodes,
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

	ln := newLimitListener(tcp, maxConns, perAddr, c.TrustedProxies)
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
		}
	}
	opts := []registry.Option{registry.WithCORSOrigins(c.CORSOrigins...)}
	if m != nil {
		m.WatchService(svc)
		opts = append(opts, registry.WithObserver(m.Observe))
		if metricsOnMain {
			opts = append(opts, registry.WithMetrics(m.Handler()))
		}
	}
	handler := registry.NewHandler(svc, opts...)
	if c.Console {
		handler = console.Mount(handler, c.Prefix)
	}
	srv := newServer(handler)
	srv.ConnState = ln.connState
	served := make(chan error, 3)
	go func() { served <- srv.Serve(ln) }()
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
		metricsAt = "http://" + ln.Addr().String() + "/metrics"
	}
	var debugSrv *http.Server
	if debugLn != nil {
		// No read or write bound but the headers': a CPU profile or a trace answers only
		// after the seconds it was asked to run.
		debugSrv = &http.Server{
			Handler: debugHandler(), ReadHeaderTimeout: timeouts.ReadHeader, MaxHeaderBytes: maxHeaderBytes,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
		go func() { served <- debugSrv.Serve(debugLn) }()
	}

	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		sweep(sweepCtx, svc, st, pg, c, log, m)
	}()

	where := "badger " + c.DataDir
	switch {
	case c.Memory:
		where = "memory"
	case pg != nil:
		where = "postgres"
	}
	consoleURL := "off"
	if c.Console {
		consoleURL = "http://" + ln.Addr().String() + console.Path
	}
	attrs := []any{"addr", "http://" + ln.Addr().String(), "store", where, "prefix", c.Prefix, "strict_signatures", c.StrictSignatures, "batch_verify", !c.SingleVerify, "max_connections", maxConns, "file_limit", files, "console", consoleURL, "metrics", metricsAt}
	if debugLn != nil {
		attrs = append(attrs, "pprof", "http://"+debugLn.Addr().String()+"/debug/pprof/")
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
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	if debugSrv != nil {
		debugSrv.Close()
	}
	stopSweep()
	// The sweeper may be inside a write that a failing disk holds up; it gets the rest of
	// the bound, shared with closing the store.
	closed := make(chan error, 1)
	go func() {
		<-swept
		log.Info("sweeper stopped")
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
		err := fmt.Errorf("the store did not close within the %v shutdown bound: Badger's memtables were not written out as tables, and the last_seen of heartbeats since the last flush (at most %v) may be lost; every other acknowledged write is in Badger's write-ahead log, replayed at the next start", bound, flushEvery)
		log.Error("shutdown overran", "err", err)
		return errors.Join(serveErr, err)
	}
}

// openStore opens the configured store and puts the node table in memory in front of it, so
// that heartbeats and node listings are served from memory with the store as the durable copy.
// With --postgres it also returns the PostgreSQL store itself, for what only it offers.
func openStore(ctx context.Context, c Config, log *slog.Logger, m *metrics.Metrics) (store.Store, *store.Postgres, error) {
	var inner store.Store
	var pg *store.Postgres
	switch {
	case c.Memory:
		inner = store.NewMemory()
	case c.Postgres != "":
		p, err := store.OpenPostgres(ctx, c.Postgres)
		if err != nil {
			return nil, nil, err
		}
		inner, pg = p, p
	default:
		abs, err := filepath.Abs(c.DataDir)
		if err != nil {
			return nil, nil, err
		}
		opts := []store.BadgerOption{store.WithBadgerLogger(log), store.WithBadgerDiskReserve(c.DiskReserve)}
		if m != nil {
			opts = append(opts, store.WithBadgerCommitObserver(m.Commit))
		}
		st, err := store.OpenBadger(abs, opts...)
		switch {
		case errors.Is(err, store.ErrNoSpace), errors.Is(err, store.ErrReadOnly),
			errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrNotDataDir):
			return nil, nil, fmt.Errorf("data directory %w", err)
		case err != nil:
			return nil, nil, fmt.Errorf("opening the store in %s: %w", abs, err)
		}
		inner = st
	}
	start := time.Now()
	st, err := store.WithNodeCache(ctx, inner)
	if err != nil {
		inner.Close()
		return nil, nil, fmt.Errorf("loading the node table: %w", err)
	}
	var n int
	st.View(ctx, func(tx store.Tx) (err error) { n, err = tx.NodeCount(); return err })
	// Reading a large table leaves behind as much garbage as it keeps; give it back to the
	// system now rather than whenever the scavenger gets to it.
	debug.FreeOSMemory()
	log.Info("node table loaded", "nodes", n, "took", time.Since(start).Round(time.Millisecond))
	return st, pg, nil
}

// challengeKeyName names the login challenge key in a shared store.
const challengeKeyName = "login-challenge-key"

// upkeepLock is the advisory lock under which one daemon on a shared database sweeps.
const upkeepLock = 0x73767270_0002

// flushEvery is how often heartbeat times kept in memory are made durable: a crash loses at
// most this much freshness, and nothing else.
const flushEvery = time.Second

// sweep runs the registry's sweep, and the store's own maintenance when it has any, every
// c.SweepEvery until ctx is done, and flushes heartbeat times every c.FlushEvery. On a shared
// database one daemon at a time sweeps: the others find the lock taken and skip the round.
func sweep(ctx context.Context, svc *registry.Service, st store.Store, pg *store.Postgres, c Config, log *slog.Logger, m *metrics.Metrics) {
	every := c.FlushEvery
	if every <= 0 {
		every = flushEvery
	}
	t := time.NewTicker(c.SweepEvery)
	defer t.Stop()
	flush := time.NewTicker(every)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-flush.C:
			if f, ok := st.(store.NodeToucher); ok {
				start := time.Now()
				err := f.Flush(ctx)
				if ctx.Err() != nil {
					continue
				}
				if m != nil {
					m.Flush(time.Since(start), err)
				}
				// A store that refuses writes has said so once; it is not said again
				// every second.
				if err != nil && !errors.Is(err, store.ErrUnavailable) {
					log.Error("making heartbeat times durable failed", "err", err)
				}
			}
			continue
		case <-t.C:
		}
		upkeep := func(ctx context.Context) error {
			if err := svc.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
				log.Error("sweep failed", "err", err)
			}
			if mt, ok := st.(store.Maintainer); ok {
				if err := mt.Maintain(ctx); err != nil {
					log.Warn("store maintenance failed", "err", err)
				}
			}
			return nil
		}
		if pg == nil {
			upkeep(ctx)
			continue
		}
		if ran, err := pg.Exclusive(ctx, upkeepLock, upkeep); err != nil && ctx.Err() == nil {
			log.Warn("taking the upkeep lock failed", "err", err)
		} else if !ran {
			log.Debug("upkeep skipped: another daemon holds the lock")
			// The global caps still count what the others added, once a sweep interval.
			if err := svc.Recount(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
				log.Error("counting for the global caps failed", "err", err)
			}
		}
	}
}
