package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/store/badger"
	"github.com/svrp/svrp/translog"
)

// Config is everything `svrpd serve` is configured with.
type Config struct {
	Listen   string // host:port; port 0 picks a free one
	DataDir  string // the Badger directory, unless Memory
	Memory   bool   // keep everything in memory: nothing survives a restart
	Postgres string // a PostgreSQL URL: the store shared with other daemons
	// FlushEvery is how often heartbeat times kept in memory are written to the store.
	FlushEvery       time.Duration
	Prefix           string // domain prefix of every signed message
	StrictSignatures bool   // refuse registrations whose signature does not verify
	// LogOrigin names the transparency log, its checkpoints' origin line; "" for the default
	// made from the prefix and the log's key.
	LogOrigin    string
	SingleVerify bool // verify each signature alone, not in batches (--batch-verify=false)
	// Limits are the registry's bounds on strangers (registry/limits.go), one flag each.
	Limits registry.Limits
	// The connection bounds of connlimit.go.
	MaxConnections           int
	MaxConnectionsPerAddress int
	TrustedProxies           []netip.Prefix
	SweepEvery               time.Duration
	LogLevel                 string
	LogFormat                string
	// DiskReserve is the free space kept on the data directory's volume; the zero value is
	// the store's default.
	DiskReserve badger.DiskReserve
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
	// Edge is how clients are told apart and their connections shed (edge.go).
	Edge Edge
	// TLS (tls.go): a certificate from files, or from ACME for ACMEDomains; HTTPRedirect
	// is a plain-HTTP listener that redirects to the API.
	TLSCert, TLSKey                     string
	ACMEDomains                         []string
	ACMEEmail, ACMEDirectory, ACMECache string
	HTTPRedirect                        string
	// PostgresPoolSize and PostgresStatementTimeout bound the connections to PostgreSQL
	// (postgres.go); zero leaves pgx's pool size and no statement timeout.
	PostgresPoolSize         int
	PostgresStatementTimeout time.Duration
	tlsCheckEvery            time.Duration // tests shorten the look at the files
}

// WithDefaults returns c with every zero bound and interval set to its default, as the
// flags default them.
func (c Config) WithDefaults() Config {
	c.Limits = c.Limits.OrDefaults()
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxConnectionsPerAddress = cmp.Or(c.MaxConnectionsPerAddress, DefaultMaxConnectionsPerAddress)
	c.FlushEvery = cmp.Or(c.FlushEvery, registry.DefaultFlushEvery)
	c.Edge = c.Edge.withDefaults()
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
	l := c.Limits
	for _, f := range limitFlags(&l) {
		if *f.v < 0 || (*f.v == 0 && !f.zeroTakesDefault) {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", f.name))
		}
	}
	if l.BoundNodeExpiry < 0 {
		errs = append(errs, errors.New("--bound-node-expiry must not be negative"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-connections", c.MaxConnections}, {"max-connections-per-address", c.MaxConnectionsPerAddress}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", f.name))
		}
	}
	errs = append(errs, c.Edge.validate()...)
	if c.LogOrigin != "" {
		if _, err := translog.NewKey(c.LogOrigin, [32]byte{}); err != nil {
			errs = append(errs, fmt.Errorf("--log-origin %q: want a name with no space or '+', such as registry.example/log", c.LogOrigin))
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
	errs = append(errs, c.validateTLS()...)
	if c.PostgresPoolSize < 0 || c.PostgresStatementTimeout < 0 {
		errs = append(errs, errors.New("--postgres-pool-size and --postgres-statement-timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// limitFlag is the flag of one field of registry.Limits.
type limitFlag struct {
	name  string
	v     *int
	usage string
	// zeroTakesDefault: zero is the registry's default, so that a Config written before
	// the bound existed still validates; any other bound must be at least 1.
	zeroTakesDefault bool
	// share: the bound is a table's quota per address group, whose default is a share of
	// the table's cap (registry.Limits.OrDefaults); its flag defaults to zero, so that a cap
	// lowered by its flag lowers its quotas with it.
	share bool
}

// limitFlags names the flag of each field of l (registry/limits.go gives their reasons).
func limitFlags(l *registry.Limits) []limitFlag {
	return []limitFlag{
		{"resolve-address-limit", &l.ResolveAddressLimit, "failed binding resolves per client address per 10 minutes before 429", false, false},
		{"register-address-limit", &l.RegisterAddressLimit, "new node keys one client address may register per hour before 429", false, false},
		{"max-nodes", &l.MaxNodes, "most node records the registry holds; when full, a new key takes the place of the least recently seen record unseen for 10 minutes and not bound, or gets 429 with Retry-After (a node in use is never displaced)", true, false},
		{"max-nodes-per-client", &l.MaxNodesPerClient, "node records the keys first registered from one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-nodes); a newcomer beyond it takes its own group's stalest record or gets 429", true, true},
		{"max-nodes-per-block", &l.MaxNodesPerBlock, "node records the keys first registered from one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-nodes)", true, true},
		{"max-nodes-per-network", &l.MaxNodesPerNetwork, "node records the keys first registered from one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-nodes)", true, true},
		{"node-expiry-hours", &l.NodeExpiryHours, "hours a node that is not bound may go unseen before the sweep removes it", true, false},
		{"max-revocations", &l.MaxRevocations, "credential revocations kept in all; when full, a new one takes the place of the oldest revocation by a root key that never logged in, over the whole list, or gets 429 — unless it revokes a credential a live session logged in with, which always gets in", true, false},
		{"revoke-address-limit", &l.RevokeAddressLimit, "new credential revocations one client address may record per hour before 429", true, false},
		{"revocations-per-root", &l.RevocationsPerRoot, "credential revocations one root key may hold under one operator DID before its next gets 429", true, false},
		{"revocations-per-block", &l.RevocationsPerBlock, "credential revocations one IPv4 /24 or IPv6 /48 may hold before its next gets 429", true, false},
		{"revocations-per-network", &l.RevocationsPerNetwork, "credential revocations one IPv4 /16 or IPv6 /32 may hold before its next gets 429 (0: 5% of --max-revocations); a revocation needs no bearer, so an operator sends it from another network", true, true},
		{"revocation-ttl-hours", &l.RevocationTTLHours, "hours a revocation by a root key that never logged in is kept; a root key that logs in keeps its revocations for good", true, false},
		{"initiate-address-limit", &l.InitiateAddressLimit, "binding initiates per client address per 10 minutes before 429", false, false},
		{"max-binding-sessions", &l.MaxOpenBindingSessions, "open binding sessions over all nodes; every open session is in use, so when full an initiate gets 429 with Retry-After until one ends", false, false},
		{"max-binding-sessions-per-client", &l.MaxOpenBindingSessionsPerClient, "open binding sessions the initiates of one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-binding-sessions)", true, true},
		{"max-binding-sessions-per-block", &l.MaxOpenBindingSessionsPerBlock, "open binding sessions the initiates of one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-binding-sessions)", true, true},
		{"max-binding-sessions-per-network", &l.MaxOpenBindingSessionsPerNetwork, "open binding sessions the initiates of one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-binding-sessions)", true, true},
		{"max-bearer-sessions", &l.MaxBearerSessions, "live operator sessions over all operators; when full, a login takes the place of the session least recently presented among those idle for 15 minutes, or gets 429 with Retry-After (a session in use is never ended for it)", false, false},
		{"max-bearer-sessions-per-client", &l.MaxBearerSessionsPerClient, "live operator sessions the logins of one IPv4 address or IPv6 /64 may hold (0: 0.5% of --max-bearer-sessions)", true, true},
		{"max-bearer-sessions-per-block", &l.MaxBearerSessionsPerBlock, "live operator sessions the logins of one IPv4 /24 or IPv6 /48 may hold (0: 1% of --max-bearer-sessions)", true, true},
		{"max-bearer-sessions-per-network", &l.MaxBearerSessionsPerNetwork, "live operator sessions the logins of one IPv4 /16 or IPv6 /32 may hold (0: 5% of --max-bearer-sessions)", true, true},
		{"max-bearer-sessions-per-operator", &l.MaxBearerSessionsPerOperator, "live sessions one operator may hold; a login beyond it ends the operator's oldest session", true, false},
		{"login-address-limit", &l.LoginAddressLimit, "login attempts per client address per 5 minutes before 429", false, false},
		{"login-failure-address-limit", &l.LoginFailureAddressLimit, "failed logins per client address per 10 minutes before 429", false, false},
		{"login-failure-operator-limit", &l.LoginFailureOperatorLimit, "failed logins of one client address naming one operator DID per 10 minutes before that address gets 429 for that DID", false, false},
		{"resolve-operator-limit", &l.ResolveOperatorLimit, "failed binding resolves per operator per 10 minutes before 429", false, false},
		{"resolve-global-limit", &l.ResolveGlobalLimit, "failed binding resolves over all clients per 10 minutes before 429", false, false},
		{"initiate-key-limit", &l.InitiateKeyLimit, "binding initiates per node key per 10 minutes before 429", false, false},
		{"malformed-address-limit", &l.MalformedAddressLimit, "malformed requests (400, 413) per client address per minute; beyond it the address gets 429 before its body is read", false, false},
		{"heartbeat-replay-address-limit", &l.HeartbeatReplayAddressLimit, "replayed heartbeats (a repeat of a node's accepted heartbeat, or an older ts, from another address than it came from) per client address per minute; beyond it the address's replays get 429, its new heartbeats are still accepted", true, false},
		{"address-block-factor", &l.AddressBlockFactor, "addresses' worth of every per-address budget (connections included) one IPv4 /24 or IPv6 /48 may spend together", true, false},
		{"max-tracked-clients", &l.MaxTrackedClients, "keys each in-memory budget table (logins, login failures, malformed requests, heartbeat replays) remembers; when full it forgets the least useful", true, false},
	}
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
