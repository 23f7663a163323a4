package daemon

import (
	"net/http"
	"time"
)

// An answer holds its connection's slot by draining. Each write of an answer is cut into
// pieces of writeChunk bytes, and each piece is due within writeChunk/floor of its start: a
// piece still under way past that marks its connection stalled, the first cut at the cap
// (connlimit.go). Each piece also moves the write deadline to sendTimeout from its start, as
// nginx's send_timeout does: a reader that takes nothing for that long is cut, cap or not.
// Both are measured per piece, not per request, so a client reading one pipelined answer
// after another, or one HTTP/2 stream after another, is held to them all along.
const (
	// DefaultSendFloor is the default of --send-floor, in bytes a second. A phone on a poor
	// 3G link reads some 50 KB a second; a reader slower than this holds a slot for a
	// fraction of what an honest client gets through it.
	DefaultSendFloor = 4 << 10
	// DefaultSendTimeout is the default of --send-timeout: a piece of an answer that
	// makes no progress this long (a reader that stopped, an HTTP/2 stream whose window
	// stays shut) is cut whether or not the connections run out.
	DefaultSendTimeout = 10 * time.Second
	// DefaultConnectionLifetime is the default of --connection-lifetime: at the connection
	// cap, a connection older than this that is making progress is cut before one that is
	// younger, so that no one holds a slot for ever by pipelining.
	DefaultConnectionLifetime = time.Minute
	// writeChunk is the piece progress is measured by: small enough that a slow reader
	// shows within two seconds at the default floor, large enough that a fast one costs a
	// check per 8 KiB.
	writeChunk = 8 << 10
)

// progressWriter is an answer's writer that measures its progress for its connection.
type progressWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	l    *limitListener
	conn *limitedConn
}

func (l *limitListener) progress(w http.ResponseWriter, c *limitedConn) http.ResponseWriter {
	if l.sendFloor <= 0 && l.sendTimeout <= 0 {
		return w
	}
	return &progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), l: l, conn: c}
}

func (w *progressWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		n := min(len(p), writeChunk)
		w.start(n)
		m, err := w.ResponseWriter.Write(p[:n])
		w.end()
		done += m
		if err != nil {
			return done, err
		}
		p = p[n:]
	}
	return done, nil
}

// start records a piece of n bytes under way, and moves the write deadline.
func (w *progressWriter) start(n int) {
	now := w.l.now()
	if w.l.sendTimeout > 0 {
		// A writer that cannot take a deadline (a test's recorder) is left without one.
		_ = w.rc.SetWriteDeadline(now.Add(w.l.sendTimeout))
	}
	if w.l.sendFloor <= 0 {
		return
	}
	due := now.Add(time.Duration(n) * time.Second / time.Duration(w.l.sendFloor))
	w.l.mu.Lock()
	if w.conn.writes == nil {
		w.conn.writes = make(map[*progressWriter]time.Time)
	}
	w.conn.writes[w] = due
	w.l.mu.Unlock()
}

func (w *progressWriter) end() {
	if w.l.sendFloor <= 0 {
		return
	}
	w.l.mu.Lock()
	delete(w.conn.writes, w)
	w.l.mu.Unlock()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// slowLocked reports whether a piece of an answer on c is under way past its due time. The
// caller holds l.mu.
func (c *limitedConn) slowLocked(now time.Time) bool {
	for _, due := range c.writes {
		if now.After(due) {
			return true
		}
	}
	return false
}
