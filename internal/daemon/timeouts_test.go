package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/limits"
)

// slowServe starts the daemon's own serve with short client timeouts and returns its
// address; it stops when the test ends.
func slowServe(t *testing.T, timeouts Timeouts) string {
	t.Helper()
	c := Config{
		Listen: "127.0.0.1:0", Memory: true, Prefix: canonical.DefaultPrefix,
		Limits: limits.DefaultLimits(), SweepEvery: time.Minute, LogLevel: "info", LogFormat: "text", Timeouts: timeouts,
	}.WithDefaults()
	return strings.TrimPrefix(serve(t, c), "http://")
}

// closedWithin reads from conn until the server closes it, and fails the test if that has
// not happened by the deadline. It returns what the server sent.
func closedWithin(t *testing.T, conn net.Conn, deadline time.Duration) []byte {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept a slow client's connection open for %v (got %q)", deadline, got)
	}
	// EOF (io.ReadAll returns nil) or a reset: either way the server closed it.
	return got
}

// slowClient starts the daemon with timeouts, connects to it and sends head at once; the
// connection closes when the test ends.
func slowClient(t *testing.T, timeouts Timeouts, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", slowServe(t, timeouts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// trickle writes p to conn one byte per interval, in the background, until it is written,
// the connection fails or the test ends.
func trickle(t *testing.T, conn net.Conn, p []byte, every time.Duration) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for _, b := range p {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
}

// The short bound the tests give the server, and the generous margin within which the
// server must then have closed the connection, for a loaded machine.
const (
	slowBound  = 500 * time.Millisecond
	slowMargin = 20 * time.Second
)

// TestSlowHeadersCutOff: a client that sends its request headers a byte at a time is cut
// off once ReadHeaderTimeout has passed, however long its headers would go on.
func TestSlowHeadersCutOff(t *testing.T) {
	conn := slowClient(t, Timeouts{ReadHeader: slowBound, Read: 2 * slowBound}, "GET /health HTTP/1.1\r\nHost: svrpd\r\nX-Slow: ")
	trickle(t, conn, []byte(strings.Repeat("a", 1<<16)), 50*time.Millisecond)
	start := time.Now()
	closedWithin(t, conn, slowBound+slowMargin)
	t.Logf("a trickling client was cut off after %v (ReadHeaderTimeout %v)", time.Since(start).Round(time.Millisecond), slowBound)
}

// TestSilentClientCutOff: a client that connects and sends nothing is cut off too.
func TestSilentClientCutOff(t *testing.T) {
	conn := slowClient(t, Timeouts{ReadHeader: slowBound, Read: 2 * slowBound, Idle: slowBound}, "")
	closedWithin(t, conn, slowBound+slowMargin)
}

// TestSlowBodyCutOff: a client that sends its headers at once and then trickles its body
// is cut off once ReadTimeout has passed.
func TestSlowBodyCutOff(t *testing.T) {
	body := `{"did":"did:svrp:n:00000000","endpoint":"203.0.113.7:7000","padding":"` + strings.Repeat("p", 4000) + `"}`
	head := fmt.Sprintf("POST /api/v1/register HTTP/1.1\r\nHost: svrpd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	conn := slowClient(t, Timeouts{ReadHeader: slowBound, Read: 2 * slowBound}, head)
	trickle(t, conn, []byte(body), 50*time.Millisecond)
	got := closedWithin(t, conn, 2*slowBound+slowMargin)
	t.Logf("the server answered a trickled body with %q and closed", firstLine(got))
}

// TestIdleKeepAliveCutOff: a client that made one request and then holds its keep-alive
// connection open without another is cut off after IdleTimeout.
func TestIdleKeepAliveCutOff(t *testing.T) {
	conn := slowClient(t, Timeouts{ReadHeader: slowBound, Read: 2 * slowBound, Idle: slowBound}, "GET /health HTTP/1.1\r\nHost: svrpd\r\n\r\n")
	got := closedWithin(t, conn, slowBound+slowMargin)
	if line := firstLine(got); line != "HTTP/1.1 200 OK" {
		t.Fatalf("first answer %q", line)
	}
}

func firstLine(b []byte) string {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}
