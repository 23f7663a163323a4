package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// The load generator shares the machine with the registry it measures, so it talks HTTP/1.1
// itself: requests are bytes built before the timed window and written in one call, and an
// answer is read into buffers that live as long as the connection. net/http would cost an
// allocation-heavy request and response per call on the same cores the server needs.

const (
	// benchReadBuffer holds a status line or header line; the registry's are short.
	benchReadBuffer = 32 << 10
	// benchKeep is how much of an answer's body is kept for reading: enough for every JSON
	// answer the scenarios look into (initiate, challenge, an error) and for the head of a
	// node list, where its count is. The rest of a larger body passes through the read
	// buffer and is dropped, so a listing of any size costs the generator no memory.
	benchKeep = 4 << 10
	// benchIOTimeout bounds one exchange, so a registry that stops answering cannot hold the
	// run past its window for long.
	benchIOTimeout = 60 * time.Second
)

// errMalformedAnswer is an answer the bench cannot parse as HTTP/1.1.
var errMalformedAnswer = errors.New("malformed HTTP answer")

// benchConn is one keep-alive connection, used by one goroutine at a time.
type benchConn struct {
	addr    string
	source  *net.TCPAddr // the local address to send from, or nil for the system's choice
	nc      net.Conn
	br      *bufio.Reader
	body    []byte // the kept head of the last answer's body
	bodyLen int64  // the length of the last answer's whole body
	// countLines asks for the newlines of each body to be counted into lines, for the
	// line-per-node /peers listing.
	countLines bool
	lines      int64
	deadlineAt time.Time
	closeAfter bool // the server asked to close after the last answer
}

func dialBench(addr string) (*benchConn, error) {
	c := &benchConn{addr: addr, body: make([]byte, 0, benchKeep)}
	return c, c.redial()
}

// dialClient opens client i's connection. Against an IPv4 loopback registry each client
// sends from its own address, 127.3.x.y, as distinct operators and nodes would: otherwise
// every request would share one client address and its per-address budgets, a hot spot no
// real registry sees (all of 127/8 reaches the loopback interface on Linux).
func dialClient(addr string, i int) (*benchConn, error) {
	c := &benchConn{addr: addr, body: make([]byte, 0, benchKeep)}
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Is4() && ap.Addr().IsLoopback() {
		c.source = &net.TCPAddr{IP: net.IPv4(127, 3, byte(i>>8), byte(i)+1)}
	}
	return c, c.redial()
}

func (c *benchConn) redial() error {
	c.close()
	d := net.Dialer{Timeout: 10 * time.Second}
	if c.source != nil {
		d.LocalAddr = c.source
	}
	nc, err := d.Dial("tcp", c.addr)
	if err != nil {
		return err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.nc = nc
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, benchReadBuffer)
	} else {
		c.br.Reset(nc)
	}
	c.deadlineAt = time.Time{}
	c.closeAfter = false
	return nil
}

func (c *benchConn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}

// roundTrip writes req, a complete HTTP/1.1 request, and reads the answer. It returns the
// status; the head of the body is in c.body until the next call. now is the caller's clock
// reading, so the deadline is only moved about once a second rather than on every call.
// After an error the connection is redialled on the next call.
func (c *benchConn) roundTrip(req []byte, now time.Time) (int, error) {
	if c.nc == nil || c.closeAfter {
		if err := c.redial(); err != nil {
			return 0, err
		}
	}
	if now.After(c.deadlineAt.Add(-benchIOTimeout + time.Second)) {
		c.deadlineAt = now.Add(benchIOTimeout)
		c.nc.SetDeadline(c.deadlineAt)
	}
	if _, err := c.nc.Write(req); err != nil {
		c.close()
		return 0, err
	}
	status, err := c.readAnswer()
	if err != nil {
		c.close()
		return 0, err
	}
	return status, nil
}

func (c *benchConn) readAnswer() (int, error) {
	c.body = c.body[:0]
	c.bodyLen, c.lines = 0, 0
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, errMalformedAnswer
	}
	status, ok := atoi3(line[9:12])
	if !ok {
		return 0, errMalformedAnswer
	}
	length, chunked := int64(-1), false
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(line) <= 2 {
			break
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			return 0, errMalformedAnswer
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return 0, errMalformedAnswer
			}
			length = n
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			c.closeAfter = asciiEqualFold(value, "close")
		}
	}
	switch {
	case chunked:
		err = c.readChunked()
	case length >= 0:
		err = c.readBody(length)
	default:
		// No length and not chunked: the body runs to the end of the connection.
		c.closeAfter = true
		err = c.readBody(-1)
	}
	return status, err
}

// readBody reads n bytes of body (n < 0: up to EOF), keeping the first benchKeep.
func (c *benchConn) readBody(n int64) error {
	if keep := int64(cap(c.body) - len(c.body)); keep > 0 {
		want := keep
		if n >= 0 && n < want {
			want = n
		}
		start := len(c.body)
		c.body = c.body[:start+int(want)]
		got, err := io.ReadFull(c.br, c.body[start:])
		c.body = c.body[:start+got]
		c.bodyLen += int64(got)
		if c.countLines {
			c.lines += int64(bytes.Count(c.body[start:], []byte{'\n'}))
		}
		if n < 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n >= 0 {
			n -= int64(got)
		}
	}
	return c.skip(n)
}

// skip reads n more bytes of body (n < 0: up to EOF) through the read buffer, counting them
// and, when asked, their newlines, and keeps none of them.
func (c *benchConn) skip(n int64) error {
	for n != 0 {
		want := c.br.Size()
		if n > 0 && n < int64(want) {
			want = int(n)
		}
		// Peek fills the buffer from the connection; what it returns is dropped at once.
		buf, err := c.br.Peek(want)
		if c.countLines {
			c.lines += int64(bytes.Count(buf, []byte{'\n'}))
		}
		c.bodyLen += int64(len(buf))
		c.br.Discard(len(buf))
		if n > 0 {
			n -= int64(len(buf))
		}
		switch {
		case n < 0 && err == io.EOF:
			return nil
		case err == io.EOF:
			return io.ErrUnexpectedEOF
		case err != nil:
			return err
		}
	}
	return nil
}

func (c *benchConn) readChunked() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || size < 0 {
			return errMalformedAnswer
		}
		if size == 0 {
			for {
				trailer, err := c.br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(trailer) <= 2 {
					return nil
				}
			}
		}
		if err := c.readBody(size); err != nil {
			return err
		}
		if _, err := c.br.Discard(2); err != nil {
			return err
		}
	}
}

func atoi3(b []byte) (int, bool) {
	n := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, true
}

// asciiEqualFold compares a header name or value with a lower-case ASCII word.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		ch := b[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != lower[i] {
			return false
		}
	}
	return true
}

// appendRequest appends an HTTP/1.1 request to dst. A POST always carries a body, even an
// empty one, so that its length is explicit.
func appendRequest(dst []byte, method, host, path, token string, body []byte) []byte {
	dst = appendHead(dst, method, host, path, token, len(body))
	return append(dst, body...)
}

// appendHead appends the request line and headers of a request whose body, of length bytes,
// the caller appends next.
func appendHead(dst []byte, method, host, path, token string, length int) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUser-Agent: svrpd-bench\r\n"...)
	if method == "POST" {
		dst = append(dst, "Content-Type: application/json\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(length), 10)
		dst = append(dst, "\r\n"...)
	}
	if token != "" {
		dst = append(dst, "Authorization: Bearer "...)
		dst = append(dst, token...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// jsonStringField finds "name":"value" in a JSON answer and returns value. It is meant for
// the registry's flat answers whose strings need no unescaping (codes, challenges, ids);
// a value with an escape is reported as absent.
func jsonStringField(body []byte, name string) ([]byte, bool) {
	var key [64]byte
	k := append(key[:0], '"')
	k = append(k, name...)
	k = append(k, `":"`...)
	i := bytes.Index(body, k)
	if i < 0 {
		return nil, false
	}
	rest := body[i+len(k):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil, false
	}
	return rest[:j], true
}

// answerCode names a failed answer for the error tally: the status and the protocol code.
func answerCode(status int, body []byte) string {
	code, ok := jsonStringField(body, "code")
	if !ok {
		return strconv.Itoa(status)
	}
	return fmt.Sprintf("%d %s", status, code)
}

// jsonIntField finds "name":<digits> in a JSON answer and returns the number, as
// jsonStringField does for strings.
func jsonIntField(body []byte, name string) (int64, bool) {
	var key [64]byte
	k := append(key[:0], '"')
	k = append(k, name...)
	k = append(k, `":`...)
	i := bytes.Index(body, k)
	if i < 0 {
		return 0, false
	}
	rest := body[i+len(k):]
	j := 0
	for j < len(rest) && j < 19 && '0' <= rest[j] && rest[j] <= '9' {
		j++
	}
	if j == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rest[:j]), 10, 64)
	return n, err == nil
}
