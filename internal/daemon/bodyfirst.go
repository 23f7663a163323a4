package daemon

import (
	"io"
	"net/http"

	"github.com/svrp/svrp/registry/httpapi"
)

// readBodyFirst reads r's body before its handler's turn, and gives the handler the same
// bytes and the same end. Waiting for a body is waiting on the client, not using a core: a
// handler that read it in its turn would hold the turn for as long as the client takes (up to
// turnHold), and strangers whose bodies never end would keep honest requests waiting in the
// queues. The bytes are held no longer than the handler would hold them, in a buffer of at
// most httpapi.MaxBodyBytes; a body longer than that is read one byte past it, so that the
// handler still sees it as too large.
func readBodyFirst(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	size := 512
	if r.ContentLength > 0 {
		size = int(min(r.ContentLength, httpapi.MaxBodyBytes))
	}
	buf := make([]byte, 0, size)
	var probe []byte
	var err error
	for {
		if len(buf) == cap(buf) {
			// Full: a byte more says whether the body goes on, before the buffer grows.
			var one [1]byte
			n, e := r.Body.Read(one[:])
			switch {
			case n == 1 && len(buf) == httpapi.MaxBodyBytes:
				probe = one[:]
			case n == 1:
				buf = append(make([]byte, 0, min(2*cap(buf), httpapi.MaxBodyBytes)), buf...)
				buf = append(buf, one[0])
			}
			if probe == nil && e == nil {
				continue
			}
			err = e
			break
		}
		n, e := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if e != nil {
			err = e
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	r.Body = &readBody{rest: buf, probe: probe, err: err, body: r.Body}
}

// readBody is a body read before its handler's turn: its bytes, the byte past the largest
// body if there was one, then the error its read ended with (io.EOF if none).
type readBody struct {
	rest, probe []byte
	err         error
	body        io.Closer
}

func (b *readBody) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		b.rest, b.probe = b.probe, nil
	}
	if len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *readBody) Close() error { return b.body.Close() }
