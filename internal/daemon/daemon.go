// Package daemon is svrpd's composition root: it turns a Config into a store, a registry
// service and an HTTP server, runs the background upkeep (heartbeat flushes and sweeps) and
// shuts all of it down in order. It holds no protocol logic of its own; that is in registry
// and the packages below it (see docs/protocol.md).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/cmdflag"
	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store"
)

// Config is everything `svrpd serve` is configured with.
type Config struct {
	Listen               string // host:port; port 0 picks a free one
	DataDir              string // the Badger directory, unless Memory
	Memory               bool   // keep everything in memory: nothing survives a restart
	Prefix               string // domain prefix of every signed message
	StrictSignatures     bool   // refuse registrations whose signature does not verify
	ResolveAddressLimit  int
	RegisterAddressLimit int
	MaxRevocations       int
	RevokeAddressLimit   int
	// The abuse bounds of registry/limits.go and connlimit.go.
	InitiateAddressLimit      int
	MaxBindingSessions        int
	MaxBearerSessions         int
	LoginAddressLimit         int
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
	// Console serves the operator console under /console/ (Main turns it on by default).
	Console bool
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
	if !c.Memory && c.DataDir == "" {
		errs = append(errs, errors.New("--data must name a directory (or use --memory)"))
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

func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func NewLogger(w io.Writer, level, format string) *slog.Logger {
	l, _ := ParseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// HTTP server timeouts: a client that trickles its headers or body is cut off.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 60 * time.Second
	// idleTimeout is how long a keep-alive connection may wait for its next request: long
	// enough for a client's next call in a sequence (login, then resolve), short enough
	// that idle connections do not pile up against the connection cap.
	idleTimeout     = 30 * time.Second
	shutdownTimeout = 15 * time.Second
	maxHeaderBytes  = 16 << 10
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
	fs.StringVar(&c.Prefix, "prefix", canonical.DefaultPrefix, `domain prefix of every signed message ("libertynet" speaks to the live network's clients)`)
	fs.BoolVar(&c.StrictSignatures, "strict-signatures", false, "refuse registrations whose signature does not verify (turns grace mode off)")
	fs.IntVar(&c.ResolveAddressLimit, "resolve-address-limit", registry.DefaultResolveAddressLimit, "failed binding resolves per client address per 10 minutes before 429")
	fs.IntVar(&c.RegisterAddressLimit, "register-address-limit", registry.DefaultRegisterAddressLimit, "new node keys one client address may register per hour before 429")
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
	fs.IntVar(&c.MaxConnections, "max-connections", DefaultMaxConnections, "open connections in total (lowered to what the file limit allows)")
	fs.IntVar(&c.MaxConnectionsPerAddress, "max-connections-per-address", DefaultMaxConnectionsPerAddress, "open connections per client address (IPv6: per /64)")
	fs.Var(prefixList{&c.TrustedProxies}, "trusted-proxy", "a proxy's address range (CIDR) whose X-Forwarded-For / Forwarded names the client; repeatable, or comma-separated in SVRPD_TRUSTED_PROXY")
	fs.DurationVar(&c.SweepEvery, "sweep-every", time.Minute, "how often expired sessions and counters are swept")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (debug logs every request)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	fs.BoolVar(&c.Console, "console", true, "serve the operator console in the browser under /console/ (--console=false turns it off)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: svrpd serve [flags]")
		fmt.Fprintln(fs.Output(), "\nEvery flag can also be set by an environment variable: SVRPD_ and its name in upper case, '-' as '_' (SVRPD_LISTEN, SVRPD_DATA, ...). A flag on the command line wins.")
		fmt.Fprintln(fs.Output(), "\nFixed limits: request bodies 64 KiB; 5 failed resolves per code per 10 minutes; 16 open binding sessions per node key; keep-alive connections idle 30 s.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := cmdflag.Parse(fs, args); !ok {
		return code
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintf(stderr, "svrpd: %v\n", strings.ReplaceAll(err.Error(), "\n", "\nsvrpd: "))
		return 2
	}
	log := NewLogger(stderr, c.LogLevel, c.LogFormat)
	if err := Run(ctx, c, log, nil); err != nil {
		log.Error("svrpd stopped", "err", err)
		return 1
	}
	return 0
}

// Run runs the registry until ctx is done, then shuts down in order: stop accepting,
// drain requests, stop the sweeper, close the store. ready, when not nil, receives the
// listening address once requests can be served.
func Run(ctx context.Context, c Config, log *slog.Logger, ready chan<- string) error {
	c = c.WithDefaults()
	st, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
		} else {
			log.Info("store closed")
		}
	}()

	svc, err := registry.New(registry.Config{
		Store: st, Prefix: c.Prefix, Logger: log, StrictSignatures: c.StrictSignatures,
		ResolveAddressLimit: c.ResolveAddressLimit, RegisterAddressLimit: c.RegisterAddressLimit,
		MaxRevocations: c.MaxRevocations, RevokeAddressLimit: c.RevokeAddressLimit,
		InitiateAddressLimit: c.InitiateAddressLimit, MaxOpenBindingSessions: c.MaxBindingSessions,
		MaxBearerSessions: c.MaxBearerSessions, LoginAddressLimit: c.LoginAddressLimit, LoginFailureAddressLimit: c.LoginFailureAddressLimit,
		LoginFailureOperatorLimit: c.LoginFailureOperatorLimit, ResolveOperatorLimit: c.ResolveOperatorLimit,
		ResolveGlobalLimit: c.ResolveGlobalLimit, TrustedProxies: c.TrustedProxies,
	})
	if err != nil {
		return err
	}
	if _, err := svc.RepairAtStart(ctx); err != nil {
		return fmt.Errorf("repairing sessions at start: %w", err)
	}

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
		return err
	}
	ln := newLimitListener(tcp, maxConns, perAddr, c.TrustedProxies)
	timeouts := c.Timeouts.orDefaults()
	handler := registry.NewHandler(svc)
	if c.Console {
		handler = console.Mount(handler, c.Prefix)
	}
	srv := &http.Server{
		ConnState:         ln.connState,
		Handler:           handler,
		ReadHeaderTimeout: timeouts.ReadHeader,
		ReadTimeout:       timeouts.Read,
		WriteTimeout:      timeouts.Write,
		IdleTimeout:       timeouts.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		sweep(sweepCtx, svc, st, c.SweepEvery, log)
	}()

	where := "badger " + c.DataDir
	if c.Memory {
		where = "memory"
	}
	consoleURL := "off"
	if c.Console {
		consoleURL = "http://" + ln.Addr().String() + console.Path
	}
	log.Info("svrpd serving", "addr", "http://"+ln.Addr().String(), "store", where, "prefix", c.Prefix, "strict_signatures", c.StrictSignatures, "max_connections", maxConns, "file_limit", files, "console", consoleURL)
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
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("requests still open at the shutdown deadline", "err", err)
	}
	stopSweep()
	<-swept
	log.Info("sweeper stopped")
	return serveErr
}

// openStore opens the configured store and puts the node table in memory in front of it, so
// that heartbeats and node listings are served from memory with the store as the durable copy.
func openStore(ctx context.Context, c Config, log *slog.Logger) (store.Store, error) {
	var inner store.Store
	if c.Memory {
		inner = store.NewMemory()
	} else {
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return nil, err
		}
		abs, _ := filepath.Abs(c.DataDir)
		st, err := store.OpenBadger(c.DataDir, store.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("opening the store in %s: %w", abs, err)
		}
		inner = st
	}
	start := time.Now()
	st, err := store.WithNodeCache(ctx, inner)
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("loading the node table: %w", err)
	}
	var n int
	st.View(ctx, func(tx store.Tx) (err error) { n, err = tx.NodeCount(); return err })
	// Reading a large table leaves behind as much garbage as it keeps; give it back to the
	// system now rather than whenever the scavenger gets to it.
	debug.FreeOSMemory()
	log.Info("node table loaded", "nodes", n, "took", time.Since(start).Round(time.Millisecond))
	return st, nil
}

// flushEvery is how often heartbeat times kept in memory are made durable: a crash loses at
// most this much freshness, and nothing else.
const flushEvery = time.Second

// sweep runs the registry's sweep, and the store's own maintenance when it has any, every
// interval until ctx is done.
func sweep(ctx context.Context, svc *registry.Service, st store.Store, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-flush.C:
			if f, ok := st.(store.NodeToucher); ok {
				if err := f.Flush(ctx); err != nil && ctx.Err() == nil {
					log.Error("making heartbeat times durable failed", "err", err)
				}
			}
			continue
		case <-t.C:
		}
		if err := svc.Sweep(ctx); err != nil && ctx.Err() == nil {
			log.Error("sweep failed", "err", err)
		}
		if m, ok := st.(store.Maintainer); ok {
			if err := m.Maintain(ctx); err != nil {
				log.Warn("store maintenance failed", "err", err)
			}
		}
	}
}
