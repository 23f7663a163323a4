package daemon

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/svrpdtest"
	"github.com/svrp/svrp/internal/testkit"
)

// testCert makes a self-signed certificate for names (an IP address is put in as one) and
// its key, both PEM.
func testCert(t *testing.T, serial int64, names ...string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), cert
}

// writeCert writes a certificate for 127.0.0.1 with serial into dir's cert.pem and
// key.pem, replacing them as a renewal tool would, and returns the certificate.
func writeCert(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	c, k, cert := testCert(t, serial, "127.0.0.1", "localhost")
	for name, b := range map[string][]byte{"cert.pem": c, "key.pem": k} {
		tmp := filepath.Join(dir, name+".new")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return cert
}

// tlsConfig serves over TLS with the pair in dir.
func tlsConfig(t *testing.T, dir string) Config {
	c := serveConfig(t)
	c.TLSCert, c.TLSKey = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	return c
}

// handshake connects to addr over TLS as serverName, offering HTTP/2, and returns what
// was negotiated: the certificate served and the protocol.
func handshake(t *testing.T, addr, serverName string, roots *x509.CertPool) (tls.ConnectionState, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{
		ServerName: serverName, RootCAs: roots, NextProtos: []string{"h2", "http/1.1"},
	})
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	return conn.ConnectionState(), nil
}

// servedSerial returns the serial number of the certificate addr serves now.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// The API is served over TLS, and a client that offers HTTP/2 gets it: a request is
// answered over HTTP/2 with the API's answer.
func TestTLSServesHTTP2(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir, 1)
	base := serve(t, tlsConfig(t, dir))
	addr := strings.TrimPrefix(base, "http://")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool(cert)}, ForceAttemptHTTP2: true,
	}}
	res, err := hc.Get("https://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.ProtoMajor != 2 || res.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("GET /health over TLS: %d over %s (ALPN %q), want 200 over HTTP/2", res.StatusCode, res.Proto, res.TLS.NegotiatedProtocol)
	}
	if !strings.Contains(body.String(), `"service":"svrpd"`) {
		t.Errorf("body %q is not the health answer", body.String())
	}
	// Plain HTTP on the TLS port is not served.
	res, err = http.Get("http://" + addr + "/health")
	if err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Error("plain HTTP on the TLS port answered 200")
		}
	}
}

// A body larger than a stream's first window, sent by Go's client as a new HTTP/2 connection's
// first request, is read and answered: a client may send the first 65,535 bytes of a stream
// before it has read the server's settings, and a server advertising a smaller window resets
// the stream (FLOW_CONTROL_ERROR) instead.
func TestTLSHTTP2FirstBodyOnNewConnection(t *testing.T) {
	dir := t.TempDir()
	cert := writeCert(t, dir, 1)
	addr := strings.TrimPrefix(serve(t, tlsConfig(t, dir)), "http://")
	body := bytes.Repeat([]byte(" "), 60<<10) // 60 KiB of JSON white space: no valid request
	for i := range 20 {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(cert)}, ForceAttemptHTTP2: true}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: tr}
		res, err := hc.Post("https://"+addr+"/api/v1/register", "application/json", bytes.NewReader(body))
		tr.CloseIdleConnections()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		res.Body.Close()
		if res.ProtoMajor != 2 || res.StatusCode != http.StatusBadRequest {
			t.Fatalf("request %d: %d over %s; want 400 over HTTP/2", i, res.StatusCode, res.Proto)
		}
	}
}

// A renewed certificate is served without a restart: when its files change, and on SIGHUP.
// Files that do not load leave the certificate in use as it was.
func TestTLSCertificateReload(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir, 1)
	c := tlsConfig(t, dir)
	c.tlsCheckEvery = 20 * time.Millisecond
	var logs testkit.Buffer
	addr := strings.TrimPrefix(serveLogged(t, c, NewLogger(&logs, c.LogLevel, c.LogFormat)), "http://")
	served := func() int64 { return servedSerial(t, addr) }
	waitServed := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(testkit.WaitBound)
		for served() != want {
			if time.Now().After(deadline) {
				t.Fatalf("serial %d still not served", want)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	if _, err := handshake(t, addr, "localhost", pool(first)); err != nil {
		t.Fatalf("the first certificate: %v", err)
	}
	wantCertLine(t, logs.String(), "file="+c.TLSCert, first)
	writeCert(t, dir, 2)
	waitServed(2)

	// A broken renewal: the certificate in use stays. A handshake looks at the files, so
	// handshakes go on until one has found them broken.
	os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("not a certificate"), 0o600)
	for deadline := time.Now().Add(testkit.WaitBound); !strings.Contains(logs.String(), "TLS certificate not reloaded"); {
		if time.Now().After(deadline) {
			t.Fatalf("the broken file was not noticed:\n%s", logs.String())
		}
		served()
		time.Sleep(25 * time.Millisecond)
	}
	if got := served(); got != 2 {
		t.Fatalf("after a broken certificate file, serial %d is served, want 2 still", got)
	}
	writeCert(t, dir, 3)
	waitServed(3)
}

// SIGHUP reloads the files at once, whenever the handshakes last looked at them.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	c := tlsConfig(t, dir)
	c.tlsCheckEvery = time.Hour
	addr := strings.TrimPrefix(serve(t, c), "http://")
	serial := func() int64 { return servedSerial(t, addr) }
	if got := serial(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	writeCert(t, dir, 2)
	if got := serial(); got != 1 {
		t.Fatalf("serial %d before SIGHUP with an hour between looks at the files, want 1", got)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testkit.WaitBound)
	for serial() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the certificate")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noFollow is a client that reports redirects instead of following them.
var noFollow = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// The redirect listener sends plain HTTP to the same host and path over HTTPS.
func TestHTTPRedirect(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	c := tlsConfig(t, dir)
	c.HTTPRedirect = testkit.FreeAddr(t)
	addr := strings.TrimPrefix(serve(t, c), "http://")
	_, port, _ := net.SplitHostPort(addr)
	for _, tc := range []struct{ method, path, host, want string }{
		{"GET", "/nodes?region=eu", "", "https://127.0.0.1:" + port + "/nodes?region=eu"},
		{"POST", "/api/v1/register", "registry.example.net", "https://registry.example.net:" + port + "/api/v1/register"},
		{"GET", "/", "registry.example.net:80", "https://registry.example.net:" + port + "/"},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+c.HTTPRedirect+tc.path, nil)
		if tc.host != "" {
			req.Host = tc.host
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != tc.want {
			t.Errorf("%s %s (Host %q): %d to %q, want 308 to %q", tc.method, tc.path, tc.host, res.StatusCode, res.Header.Get("Location"), tc.want)
		}
	}
	if h := redirectToHTTPS("443"); h != nil {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://registry.example.net/x", nil))
		if got := rec.Header().Get("Location"); got != "https://registry.example.net/x" {
			t.Errorf("redirect to port 443 names it: %q", got)
		}
	}
}

// ACME up to the certificate authority: a certificate in the cache is served for its name
// over HTTP/2; a name not given is refused without asking the authority; a name given with
// nothing cached is asked of the configured authority; the redirect listener answers
// HTTP-01 challenges for the names given and redirects the rest.
func TestACMEUpToTheAuthority(t *testing.T) {
	var asked atomic.Int64
	authority := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, `{"type":"urn:ietf:params:acme:error:malformed","detail":"test authority"}`, http.StatusNotFound)
	}))
	defer authority.Close()

	cache := t.TempDir()
	certPEM, keyPEM, cached := testCert(t, 7, "cached.example.test")
	if err := os.WriteFile(filepath.Join(cache, "cached.example.test"), append(keyPEM, certPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	c := serveConfig(t)
	c.ACMEDomains = []string{"cached.example.test", "fresh.example.test"}
	c.ACMECache = cache
	c.ACMEDirectory = authority.URL
	c.HTTPRedirect = testkit.FreeAddr(t)
	var logs testkit.Buffer
	addr := strings.TrimPrefix(serveLogged(t, c, NewLogger(&logs, c.LogLevel, c.LogFormat)), "http://")

	st, err := handshake(t, addr, "cached.example.test", pool(cached))
	if err != nil {
		t.Fatalf("the cached certificate: %v", err)
	}
	if _, err := handshake(t, addr, "cached.example.test", pool(cached)); err != nil {
		t.Fatalf("the cached certificate again: %v", err)
	}
	wantCertLine(t, logs.String(), "acme="+authority.URL, cached)
	if st.NegotiatedProtocol != "h2" || st.PeerCertificates[0].SerialNumber.Int64() != 7 {
		t.Errorf("served serial %d over %q, want the cached one over h2", st.PeerCertificates[0].SerialNumber, st.NegotiatedProtocol)
	}
	if _, err := handshake(t, addr, "other.example.test", nil); err == nil {
		t.Error("a name not given got a certificate")
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the authority was asked %d times before any name needed it", n)
	}
	if _, err := handshake(t, addr, "fresh.example.test", nil); err == nil {
		t.Error("a name the authority refused got a certificate")
	}
	if asked.Load() == 0 {
		t.Error("a name given with nothing cached did not reach the authority")
	}

	for _, tc := range []struct {
		host, path string
		want       int
	}{
		{"cached.example.test", "/.well-known/acme-challenge/unknown-token", http.StatusNotFound},
		{"other.example.test", "/.well-known/acme-challenge/unknown-token", http.StatusForbidden},
		{"cached.example.test", "/nodes", http.StatusPermanentRedirect},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+c.HTTPRedirect+tc.path, nil)
		req.Host = tc.host
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("GET %s (Host %s) on the redirect listener: %d, want %d", tc.path, tc.host, res.StatusCode, tc.want)
		}
	}
}

// wantCertLine fails t unless logs has one "TLS certificate loaded" line for cert, from
// where it came, naming it by its serial number and fingerprint as openssl prints them.
func wantCertLine(t *testing.T, logs, from string, cert *x509.Certificate) {
	t.Helper()
	sum := sha256.Sum256(cert.Raw)
	digits := strings.ToUpper(hex.EncodeToString(sum[:]))
	fingerprint := digits[:2]
	for i := 2; i < len(digits); i += 2 {
		fingerprint += ":" + digits[i:i+2]
	}
	want := []string{`msg="TLS certificate loaded"`, from, fmt.Sprintf("serial=%X", cert.SerialNumber), "sha256=" + fingerprint,
		"not_after=" + cert.NotAfter.UTC().Format("2006-01-02T15:04:05")}
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, want[0]) || !strings.Contains(line, fmt.Sprintf("serial=%X ", cert.SerialNumber)) {
			continue
		}
		n++
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("the certificate's line lacks %q:\n%s", w, line)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d lines say certificate %X was loaded, want 1:\n%s", n, cert.SerialNumber, logs)
	}
}

// The TLS flags' usage errors stop serve with exit code 2 before anything is opened.
func TestTLSUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--memory", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{"key without cert", []string{"--memory", "--tls-key", "k.pem"}, "--tls-cert and --tls-key go together"},
		{"files and ACME", []string{"--memory", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--acme-domain", "registry.example.net"}, "give one or the other"},
		{"redirect without TLS", []string{"--memory", "--http-redirect", ":80"}, "--http-redirect redirects to HTTPS"},
		{"redirect not an address", []string{"--memory", "--acme-domain", "registry.example.net", "--http-redirect", "80"}, `--http-redirect "80": want host:port`},
		{"email without a domain", []string{"--memory", "--acme-email", "ops@example.net"}, "need --acme-domain"},
		{"domain not qualified", []string{"--memory", "--acme-domain", "localhost"}, `--acme-domain "localhost": want a fully qualified domain name`},
		{"domain with a port", []string{"--memory", "--acme-domain", "registry.example.net:443"}, "want a fully qualified domain name"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantUsageError(t, tc.args, nil, tc.want) })
	}
}

// A certificate that cannot be read stops the start with exit code 1, naming the flag.
func TestTLSBadFilesStopTheStart(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("nope"), 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), []byte("nope"), 0o600)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"--memory", "--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem")}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--tls-cert/--tls-key") {
		t.Fatalf("exit %d, stderr %q; want 1 and the flags named", code, stderr.String())
	}
}

// svrpd serve as a process reloads its certificate on SIGHUP, as systemctl reload sends it,
// and goes on serving.
func TestTLSProcessReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	d := svrpdtest.Start(t, nil, "--memory", "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	addr := strings.TrimPrefix(d.URL, "https://")
	serial := func() int64 { return servedSerial(t, addr) }
	first := time.Now()
	if got := serial(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	writeCert(t, dir, 2)
	sent := time.Now()
	d.Send(t, syscall.SIGHUP)
	// Until certCheckEvery after the first handshake, only SIGHUP can have reloaded.
	for serial() != 2 {
		if time.Since(first) >= certCheckEvery {
			if sent.Sub(first) > certCheckEvery/2 {
				t.Skip("the machine was too slow to tell SIGHUP from the files' own check")
			}
			t.Fatalf("SIGHUP did not reload the certificate:\n%s", d.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The line may reach the pipe after the certificate is in use.
	for deadline := time.Now().Add(testkit.WaitBound); strings.Count(d.Log.String(), `msg="TLS certificate loaded"`) != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not show the start's load and the reload's:\n%s", d.Log)
		}
	}
	if code := d.Signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, d.Log)
	}
}
