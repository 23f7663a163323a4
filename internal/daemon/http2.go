package daemon

import (
	"net/http"
	"runtime"
	"time"
)

// HTTP/2 bounds. Go's defaults suit a server of large uploads: 250 streams and 1 MiB of
// upload buffer per connection, frames of up to 1 MiB. Here a request body is at most 64
// KiB and an API client needs a few streams at once, and every byte a stranger can make the
// daemon hold, times every connection it may open, is what an attack costs the daemon.
const (
	// h2Streams is the streams one connection may have open at once; the requests in
	// flight per client group, per block and in total are bounded besides (fairness.go).
	h2Streams = 16
	// h2ConnWindow and h2StreamWindow are the upload buffers a connection and a stream
	// may fill before the handler reads: HTTP/2's minimum for a connection (below it Go
	// takes its 1 MiB default), and as much for a stream, the connection's bounding what its
	// streams hold unread together. No smaller for a stream: a client may send a stream's
	// first 65,535 bytes before it has read the server's settings (RFC 9113 §6.9.2), and
	// Go's server resets a stream past a smaller window at once, so an honest client sending
	// a body over it on a new connection would be refused for nothing.
	h2ConnWindow   = 64 << 10
	h2StreamWindow = 64 << 10
	// h2FrameSize is the largest frame read: HTTP/2's minimum. A connection keeps a read
	// buffer as large as the largest frame it was sent.
	h2FrameSize = 16 << 10
	// cancelBudget is how many streams a connection may cancel before their answers start
	// within cancelWindow; past it the connection is closed (cancelbudget.go). An honest
	// client cancels a request when its user gives up on it, a few a minute; a rapid-reset
	// attacker cancels thousands a second, each costing the daemon a handler's start. Ten a
	// second for ten seconds refuses only the attacker; a trusted proxy, whose connections
	// carry many clients' cancellations, is never cut by it.
	cancelBudget = 100
	cancelWindow = 10 * time.Second
)

// http2Bounds is the HTTP/2 configuration of the API's server. Zero-window streams are cut
// by the progress of their answers (progress.go: sendTimeout moves each stream's write
// deadline); WriteByteTimeout cuts a connection whose socket takes nothing for as long.
// Rapid reset (CVE-2023-44487) is bounded by Go itself, a connection running at most its
// stream limit of handlers, queueing at most four times as many, and closed past that; and
// besides by cancelBudget, since within Go's bound a connection may still have its streams
// started and cancelled thousands of times a second.
func http2Bounds(sendTimeout time.Duration) *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams:          h2Streams,
		MaxReceiveBufferPerConnection: h2ConnWindow,
		MaxReceiveBufferPerStream:     h2StreamWindow,
		MaxReadFrameSize:              h2FrameSize,
		WriteByteTimeout:              sendTimeout,
	}
}

// handlerTurns is how many handlers do their work at once before the others wait their
// turn (fairness.go): enough to keep every core busy while some wait on the store.
func handlerTurns() int { return 8 * runtime.GOMAXPROCS(0) }
