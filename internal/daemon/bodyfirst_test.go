package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svrp/svrp/registry/httpapi"
)

// TestReadBodyFirst: the handler reads the same bytes, and the same end, as it would have
// read from the client: a whole body, a body too large (as too large), a body cut short (its
// error after its bytes), a body of unknown length.
func TestReadBodyFirst(t *testing.T) {
	cut := errors.New("connection reset")
	big := strings.Repeat("x", httpapi.MaxBodyBytes+10)
	for _, tc := range []struct {
		name    string
		body    io.Reader
		length  int64
		want    string
		wantErr error
		tooBig  bool
	}{
		{name: "whole", body: strings.NewReader(`{"a":1}`), length: 7, want: `{"a":1}`},
		{name: "unknown length", body: strings.NewReader(`{"a":1}`), length: -1, want: `{"a":1}`},
		{name: "shorter than said", body: strings.NewReader(`{"a"`), length: 7, want: `{"a"`},
		{name: "at the limit", body: strings.NewReader(big[:httpapi.MaxBodyBytes]), length: -1, want: big[:httpapi.MaxBodyBytes]},
		{name: "too large", body: strings.NewReader(big), length: int64(len(big)), tooBig: true},
		{name: "too large, unknown length", body: strings.NewReader(big), length: -1, tooBig: true},
		{name: "cut short", body: io.MultiReader(strings.NewReader(`{"a"`), errReader{cut}), length: 7, want: `{"a"`, wantErr: cut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/v1/register", io.NopCloser(tc.body))
			r.ContentLength = tc.length
			readBodyFirst(r)
			got, err := io.ReadAll(http.MaxBytesReader(httptest.NewRecorder(), r.Body, httpapi.MaxBodyBytes))
			var tooLarge *http.MaxBytesError
			switch {
			case tc.tooBig:
				if !errors.As(err, &tooLarge) {
					t.Fatalf("a body too large read as %d bytes, %v; want http.MaxBytesError", len(got), err)
				}
			case err != tc.wantErr || string(got) != tc.want:
				t.Fatalf("read %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// bodyCutRecorder is a recorder whose read deadline, once set, cuts the request's body as
// a server's would.
type bodyCutRecorder struct {
	*httptest.ResponseRecorder
	body *io.PipeReader
}

func (w bodyCutRecorder) SetReadDeadline(time.Time) error {
	w.body.CloseWithError(os.ErrDeadlineExceeded)
	return nil
}

// TestFairnessBodyBeforeTurn: a request whose body is still on the way holds no turn and
// its handler does not start, so another client's request runs meanwhile with the only
// turn; evicted while its body is on the way, a request is answered 429 and its handler
// never runs; once its body is complete, a request runs with the whole of it.
func TestFairnessBodyBeforeTurn(t *testing.T) {
	f := newFairness(4, 8, 1, 1) // a total of 2, 3 at most; one turn
	started := make(chan string, 4)
	h := f.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			b = []byte(err.Error())
		}
		started <- r.URL.Path + " " + string(b)
	}))
	type parked struct {
		w    *httptest.ResponseRecorder
		body *io.PipeWriter
		done chan struct{}
	}
	park := func(path, from string) parked {
		pr, pw := io.Pipe()
		r := httptest.NewRequest("POST", path, pr)
		r.ContentLength = 11
		p := parked{w: httptest.NewRecorder(), body: pw, done: make(chan struct{})}
		go func() {
			defer close(p.done)
			h.ServeHTTP(bodyCutRecorder{p.w, pr}, r.WithContext(context.WithValue(r.Context(), connKey{}, fairConn(from))))
		}()
		if _, err := pw.Write([]byte("hello")); err != nil { // returns once read
			t.Fatal(err)
		}
		return p
	}
	first := park("/first", "198.51.100.1")
	second := park("/second", "198.51.100.1")
	f.mu.Lock()
	running := f.running
	f.mu.Unlock()
	if running != 0 || len(started) != 0 {
		t.Fatalf("%d turns held and %d handlers started by requests whose bodies are on the way; want none", running, len(started))
	}
	get := func(path, from string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", path, nil)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey{}, fairConn(from))))
		return w
	}
	get("/other", "203.0.113.1") // the only turn, taken and given back
	if got := <-started; got != "/other " {
		t.Fatalf("ran %q; want /other", got)
	}
	third := park("/third", "198.51.100.2") // the hard total reached
	// A newcomer of another network evicts the request in flight longest of the network,
	// block and client holding the most: the first, its body still on the way.
	if w := get("/newcomer", "192.0.2.1"); w.Code != http.StatusOK {
		t.Fatalf("the newcomer was answered %d", w.Code)
	}
	<-first.done
	if first.w.Code != http.StatusTooManyRequests {
		t.Fatalf("the request evicted while its body was on the way was answered %d; want 429", first.w.Code)
	}
	if got := <-started; got != "/newcomer " {
		t.Fatalf("ran %q; want /newcomer", got)
	}
	second.body.Write([]byte(" world"))
	second.body.Close()
	<-second.done
	if got := <-started; got != "/second hello world" || second.w.Code != http.StatusOK {
		t.Fatalf("ran %q, answered %d; want /second with its whole body", got, second.w.Code)
	}
	third.body.Write([]byte(" there"))
	third.body.Close()
	<-third.done
	if got := <-started; got != "/third hello there" {
		t.Fatalf("ran %q; want /third with its whole body", got)
	}
	if len(started) != 0 {
		t.Fatal("the evicted request's handler ran")
	}
}
