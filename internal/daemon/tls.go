package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// TLS serving. The daemon terminates TLS itself, with a certificate from files it reloads
// when they change (a renewal by certbot or any other tool needs no restart), or with
// certificates it obtains and renews by ACME. It uses golang.org/x/crypto/acme/autocert
// rather than certmagic: autocert is part of a module the Go project maintains and brings
// one more of them (golang.org/x/net, for international domain names), where certmagic
// brings a DNS library, a logging framework and an ACME client of its own, for features (DNS
// challenges, a cache shared by a cluster) a registry reachable on port 443 or 80 does not
// need.

// tlsFlags registers the TLS flags of serve.
func tlsFlags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate chain (with --tls-key); reloaded on SIGHUP and when the file changes")
	fs.StringVar(&c.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	fs.Func("acme-domain", "serve HTTPS with a certificate obtained and renewed by ACME for this `name`; repeatable or comma-separated (the daemon must be reachable on port 443, or on port 80 through --http-redirect)", appendList(&c.ACMEDomains))
	fs.StringVar(&c.ACMEEmail, "acme-email", "", "contact address given to the ACME certificate authority (expiry and policy notices)")
	fs.StringVar(&c.ACMEDirectory, "acme-directory", autocert.DefaultACMEDirectory, "the ACME certificate authority's directory URL (Let's Encrypt's by default; its staging URL for trials)")
	fs.StringVar(&c.ACMECache, "acme-cache", "", `directory where ACME keeps its account key and certificates (default "acme" under --data)`)
	fs.StringVar(&c.HTTPRedirect, "http-redirect", "", "with TLS on, also listen for plain HTTP on this host:port (such as :80) and answer with a redirect to HTTPS; it answers ACME's HTTP-01 challenges too")
}

// appendList is the Set of a repeatable flag whose one value may also list several,
// separated by commas.
func appendList(dst *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*dst = append(*dst, item)
			}
		}
		return nil
	}
}

// TLSOn reports whether the API is served over TLS.
func (c Config) TLSOn() bool { return c.TLSCert != "" || c.TLSKey != "" || len(c.ACMEDomains) > 0 }

// validateTLS returns the TLS flags' usage errors.
func (c Config) validateTLS() []error {
	var errs []error
	files := c.TLSCert != "" || c.TLSKey != ""
	if files && (c.TLSCert == "" || c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together: give both files"))
	}
	if files && len(c.ACMEDomains) > 0 {
		errs = append(errs, errors.New("--tls-cert/--tls-key and --acme-domain are two ways of getting a certificate: give one or the other"))
	}
	for _, d := range c.ACMEDomains {
		if strings.Contains(d, ":") || strings.Contains(d, "/") || !strings.Contains(strings.Trim(d, "."), ".") {
			errs = append(errs, fmt.Errorf("--acme-domain %q: want a fully qualified domain name, such as registry.example.net", d))
		}
	}
	if len(c.ACMEDomains) == 0 && (c.ACMEEmail != "" || c.ACMECache != "") {
		errs = append(errs, errors.New("--acme-email and --acme-cache need --acme-domain"))
	}
	if c.HTTPRedirect != "" {
		if !c.TLSOn() {
			errs = append(errs, errors.New("--http-redirect redirects to HTTPS: it needs --tls-cert/--tls-key or --acme-domain"))
		} else if _, _, err := net.SplitHostPort(c.HTTPRedirect); err != nil {
			errs = append(errs, fmt.Errorf("--http-redirect %q: want host:port, such as :80", c.HTTPRedirect))
		}
	}
	return errs
}

// front is the daemon's HTTPS side: the TLS configuration of the API's listener and the
// plain-HTTP listener that redirects to it. Its zero value serves plain HTTP.
type front struct {
	config   *tls.Config
	redirect net.Listener
	// challenges wraps the redirect handler with ACME's HTTP-01 answers; nil without ACME.
	challenges  func(http.Handler) http.Handler
	redirectSrv *http.Server
	// stopReload ends the reloading of certificate files on SIGHUP; nil without files.
	stopReload context.CancelFunc
}

// newFront loads the certificate or sets up ACME, and binds the redirect listener. It
// reads no more than the certificate files: ACME's cache is written at the first issuance.
func newFront(ctx context.Context, c Config, log *slog.Logger) (*front, error) {
	f := &front{}
	switch {
	case c.TLSCert != "":
		files := &certFiles{cert: c.TLSCert, key: c.TLSKey, log: log, every: c.tlsCheckEvery}
		if files.every <= 0 {
			files.every = certCheckEvery
		}
		if err := files.load(); err != nil {
			return nil, err
		}
		// Asked for before serving, so that no SIGHUP from then on ends the process.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		hctx, stop := context.WithCancel(ctx)
		f.stopReload = stop
		go files.reloadOnHangup(hctx, hup)
		f.config = &tls.Config{GetCertificate: files.get, NextProtos: []string{"h2", "http/1.1"}}
	case len(c.ACMEDomains) > 0:
		m := acmeManager(c)
		f.config = m.TLSConfig()
		logged := &acmeLog{get: f.config.GetCertificate, directory: c.ACMEDirectory, log: log, served: map[string][32]byte{}}
		f.config.GetCertificate = logged.certificate
		f.challenges = m.HTTPHandler
	default:
		return f, nil
	}
	if c.HTTPRedirect != "" {
		ln, err := net.Listen("tcp", c.HTTPRedirect)
		if err != nil {
			return nil, fmt.Errorf("--http-redirect: %w", err)
		}
		f.redirect = ln
	}
	return f, nil
}

// acmeManager obtains and renews the certificates of c.ACMEDomains, and only theirs: a
// handshake naming another host gets no certificate, so a scanner cannot make the daemon
// ask the authority for names it does not serve.
func acmeManager(c Config) *autocert.Manager {
	cache := c.ACMECache
	if cache == "" {
		cache = filepath.Join(c.DataDir, "acme")
	}
	return &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(cache),
		HostPolicy: autocert.HostWhitelist(c.ACMEDomains...),
		Email:      c.ACMEEmail,
		Client:     &acme.Client{DirectoryURL: c.ACMEDirectory},
	}
}

// scheme is the URL scheme of the API's listener.
func (f *front) scheme() string {
	if f.config != nil {
		return "https"
	}
	return "http"
}

// serve serves srv on ln, over TLS when it is on; HTTP/2 is offered there by ALPN.
func (f *front) serve(srv *http.Server, ln *limitListener) error {
	if f.config == nil {
		srv.ConnState = ln.connState
		return srv.Serve(ln)
	}
	srv.TLSConfig = f.config
	// The server hands the hook the TLS connection; the cap counts the one beneath it.
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		ln.connState(c, st)
	}
	return srv.ServeTLS(ln, "", "")
}

// startRedirect serves the redirect listener, when there is one, with a server newServer
// makes; it reports the server's end on served.
func (f *front) startRedirect(apiAddr net.Addr, newServer func(http.Handler) *http.Server, served chan<- error) {
	if f.redirect == nil {
		return
	}
	_, port, _ := net.SplitHostPort(apiAddr.String())
	h := redirectToHTTPS(port)
	if f.challenges != nil {
		h = f.challenges(h)
	}
	f.redirectSrv = newServer(h)
	go func() { served <- f.redirectSrv.Serve(f.redirect) }()
}

// close stops the redirect listener and the reloading on SIGHUP.
func (f *front) close() {
	if f.stopReload != nil {
		f.stopReload()
	}
	if f.redirectSrv != nil {
		f.redirectSrv.Close()
	} else if f.redirect != nil {
		f.redirect.Close()
	}
}

// redirectToHTTPS answers every request with a permanent redirect to the same host and
// path over HTTPS on port. 308 keeps the method, so a client that posted gets its answer
// by posting again over TLS.
func redirectToHTTPS(port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "a Host header is needed to redirect to HTTPS", http.StatusBadRequest)
			return
		}
		if port != "443" {
			host = net.JoinHostPort(host, port)
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// certCheckEvery is how often, at most, a handshake looks whether the certificate files
// changed: a renewal is served within this of being written, for one stat of each file.
const certCheckEvery = 5 * time.Second

// certFiles is a certificate kept from a pair of files: loaded at start, again when a
// handshake finds the files changed, and on SIGHUP. A pair that does not load (a renewal
// half written, a key that does not match) leaves the certificate in use as it is.
type certFiles struct {
	cert, key string
	log       *slog.Logger
	every     time.Duration

	current atomic.Pointer[tls.Certificate]
	mu      sync.Mutex // held by the one handshake that checks the files
	checked time.Time
	tried   fileStamp // the files as they were at the last load, successful or not
}

// fileStamp tells a changed file from an unchanged one without reading it.
type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

func (f *certFiles) stamp() fileStamp {
	var s fileStamp
	if fi, err := os.Stat(f.cert); err == nil {
		s.certMod, s.certSize = fi.ModTime(), fi.Size()
	}
	if fi, err := os.Stat(f.key); err == nil {
		s.keyMod, s.keySize = fi.ModTime(), fi.Size()
	}
	return s
}

// load reads the pair and puts it in use.
func (f *certFiles) load() error {
	f.tried = f.stamp()
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	f.current.Store(&pair)
	f.log.Info("TLS certificate loaded", append([]any{"file", f.cert}, certAttrs(pair.Leaf)...)...)
	return nil
}

// certAttrs say which certificate is served: its names, its serial number and SHA-256
// fingerprint as openssl x509 -noout -serial -fingerprint -sha256 prints them, and its
// expiry.
func certAttrs(leaf *x509.Certificate) []any {
	names := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	sum := sha256.Sum256(leaf.Raw)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	return []any{"names", names, "serial", fmt.Sprintf("%X", leaf.SerialNumber),
		"sha256", strings.Join(hexes, ":"), "not_after", leaf.NotAfter.UTC()}
}

// acmeLog logs each certificate ACME hands the handshakes the first time it is served, as
// certFiles logs each pair it loads: autocert obtains, renews and reads its cache without
// a word.
type acmeLog struct {
	get       func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	directory string
	log       *slog.Logger

	mu     sync.Mutex
	served map[string][32]byte // by the certificate's names, the fingerprint last logged
}

// certificate is the listener's GetCertificate.
func (a *acmeLog) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := a.get(hello)
	if err != nil || c == nil || c.Leaf == nil || slices.Contains(hello.SupportedProtos, acme.ALPNProto) {
		// A TLS-ALPN-01 challenge's handshake gets a certificate made for the authority alone.
		return c, err
	}
	// Keyed by the names autocert issued for, which its host policy bounds, rather than by
	// the name a client sent.
	names := strings.Join(c.Leaf.DNSNames, ",")
	sum := sha256.Sum256(c.Leaf.Raw)
	a.mu.Lock()
	fresh := a.served[names] != sum
	a.served[names] = sum
	a.mu.Unlock()
	if fresh {
		a.log.Info("TLS certificate loaded", append([]any{"acme", a.directory}, certAttrs(c.Leaf)...)...)
	}
	return c, nil
}

// reload loads the pair again, keeping the certificate in use when it fails. The caller
// holds mu.
func (f *certFiles) reload() {
	if err := f.load(); err != nil {
		f.log.Warn("TLS certificate not reloaded: the one loaded before is still served", "err", err)
	}
}

// get is the listener's GetCertificate: the certificate in use, after a look at the files
// when the last look is older than every.
func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if f.mu.TryLock() {
		if now := time.Now(); now.Sub(f.checked) >= f.every {
			f.checked = now
			if f.stamp() != f.tried {
				f.reload()
			}
		}
		f.mu.Unlock()
	}
	return f.current.Load(), nil
}

// reloadOnHangup reloads the pair on every signal on hup until ctx is done.
func (f *certFiles) reloadOnHangup(ctx context.Context, hup chan os.Signal) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			f.mu.Lock()
			f.reload()
			f.mu.Unlock()
		}
	}
}
