package daemon

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/limits"
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
	// Limits are the registry's bounds on strangers (package registry/limits), one flag each.
	Limits limits.Limits
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
	errs = append(errs, validateLimits(c.Limits)...)
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

// limitFlags defines on fs the flag of every field of l, as limits.Bounds declares them
// (package registry/limits gives their reasons).
func limitFlags(fs *flag.FlagSet, l *limits.Limits) {
	def := limits.DefaultLimits()
	for _, b := range limits.Bounds() {
		switch p := b.Int(l); {
		case p != nil && b.Share:
			// Zero is the share of the table's cap that the cap, as set, gives.
			fs.IntVar(p, b.Flag, 0, b.Usage)
		case p != nil:
			fs.IntVar(p, b.Flag, *b.Int(&def), b.Usage)
		case b.Unit > 0:
			d := b.Duration(l)
			*d = *b.Duration(&def)
			fs.Var(unitFlag{d, b.Unit}, b.Flag, b.Usage)
		default:
			fs.DurationVar(b.Duration(l), b.Flag, *b.Duration(&def), b.Usage)
		}
	}
}

// validateLimits refuses a bound its flag cannot mean: a count below 1 (or below 0 where zero
// takes the default), a negative duration.
func validateLimits(l limits.Limits) []error {
	var errs []error
	for _, b := range limits.Bounds() {
		if p := b.Int(&l); p != nil && (*p < 0 || (*p == 0 && !b.ZeroTakesDefault)) {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", b.Flag))
		}
		if p := b.Duration(&l); p != nil && *p < 0 {
			if b.Unit > 0 {
				errs = append(errs, fmt.Errorf("--%s must be at least 1", b.Flag))
			} else {
				errs = append(errs, fmt.Errorf("--%s must not be negative", b.Flag))
			}
		}
	}
	return errs
}

// unitFlag is a duration set as a whole number of unit, for a flag that took a number before
// its field was a duration. A number too large for a duration is the longest one, which is
// what it was given to mean: never.
type unitFlag struct {
	d    *time.Duration
	unit time.Duration
}

func (f unitFlag) String() string {
	if f.d == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.d/f.unit), 10)
}

func (f unitFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return err
	}
	switch {
	case n > int64(math.MaxInt64/f.unit):
		*f.d = math.MaxInt64
	case n < int64(math.MinInt64/f.unit):
		*f.d = math.MinInt64
	default:
		*f.d = time.Duration(n) * f.unit
	}
	return nil
}

// Get implements flag.Getter: a count, so that a bad value is told to be a whole number.
func (f unitFlag) Get() any { return int64(*f.d / f.unit) }

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
