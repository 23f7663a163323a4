package bench

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The watcher's conditional polls speak the listing API: If-None-Match with the last ETag
// (304 without a body), changed_since the previous poll's time, gzip, and pages followed by
// Link rel="next"; against a registry that does, they receive a fraction of the bytes.
func TestWatcherPollsConditionally(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	version, unchanged := 0, false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		q := r.URL.Query()
		// The listing changes after every other conditional poll that finds it unchanged,
		// as heartbeats would change it: by count, not by time, so that a machine slow to
		// poll still sees polls both with and without a change.
		etag := fmt.Sprintf(`"v%d"`, version)
		if r.Header.Get("If-None-Match") == etag {
			if unchanged {
				version++
				etag = fmt.Sprintf(`"v%d"`, version)
			}
			unchanged = !unchanged
		}
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/register":
			io.WriteString(w, `{"ok":true,"registered":true,"signed":true}`)
			return
		case r.Method == http.MethodPost:
			io.WriteString(w, `{"ok":true}`)
			return
		case r.Header.Get("If-None-Match") == etag:
			seen["304"]++
			w.WriteHeader(http.StatusNotModified)
			return
		}
		nodes := 200
		if since := q.Get("changed_since"); since != "" {
			if _, err := time.Parse(time.RFC3339, since); err != nil || len(since) != 20 {
				t.Errorf("changed_since %q", since)
			}
			seen["changed_since"]++
			nodes = 5
		}
		if q.Get("limit") != "" && q.Get("cursor") == "" {
			seen["paged"]++
			w.Header().Set("Link", `</nodes?cursor=2&limit=5>; rel="next"`)
		}
		if q.Get("cursor") == "2" {
			seen["next page"]++
		}
		w.Header().Set("ETag", etag)
		body := io.Writer(w)
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			defer zw.Close()
			body = zw
		}
		fmt.Fprintf(body, `{"count":%d,"nodes":[%s]}`, nodes, strings.Repeat(`{"did":"did:svrp:n:0123abcd","endpoint":"10.0.0.1:9000"},`, nodes))
	}))
	defer srv.Close()
	b := &bench{cfg: config{url: srv.URL, duration: 300 * time.Millisecond, requests: 1 << 20, prefix: "svrp", pollEvery: 20 * time.Millisecond, beatRate: 100, pageLimit: 5},
		stdout: io.Discard, stderr: io.Discard, text: io.Discard}
	tg, err := b.target(t.Context(), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.watcher(t.Context(), tg, 4, 20)
	if err != nil {
		t.Fatal(err)
	}
	whole, cond := res.Phases[0], res.Phases[1]
	if whole.Ops == 0 || cond.Ops == 0 || whole.Failed != nil || cond.Failed != nil {
		t.Fatalf("phases %+v", res.Phases)
	}
	if r := res.Figures["bytes_whole_over_conditional"]; r < 5 {
		t.Errorf("whole %.0f bytes a poll, conditional %.0f: ratio %.1f", whole.BytesPerOp, cond.BytesPerOp, r)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"304", "changed_since", "paged", "next page"} {
		if seen[k] == 0 {
			t.Errorf("no %s poll; the server saw %v", k, seen)
		}
	}
	if res.Figures["heartbeats_sent"] == 0 || res.Figures["heartbeats_failed"] != 0 {
		t.Errorf("heartbeats %v", res.Figures)
	}
}

// Interleaved rounds give every op one window a round, each round beginning one op later, and
// keep each op's windows apart in round order.
func TestInterleaved(t *testing.T) {
	b := &bench{cfg: config{duration: 60 * time.Millisecond, requests: 1 << 40}}
	var order []int
	opOf := func(k int) op {
		return func(context.Context, int) (outcome, bool) {
			if len(order) == 0 || order[len(order)-1] != k {
				order = append(order, k)
			}
			time.Sleep(time.Millisecond)
			return outcome{bytes: int64(k)}, true
		}
	}
	rounds, err := b.interleaved(t.Context(), &target{}, 1, 3, []op{opOf(0), opOf(1), opOf(2)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}; !slices.Equal(order, want) {
		t.Errorf("windows in the order %v, want %v", order, want)
	}
	for k, rs := range rounds {
		if len(rs) != 3 {
			t.Fatalf("op %d: %d windows, want one a round", k, len(rs))
		}
		for _, s := range rs {
			if len(s.lat) == 0 || s.bytes != int64(k*len(s.lat)) || s.cpu != nil {
				t.Errorf("op %d: a window of %d ops and %d bytes, CPU %v", k, len(s.lat), s.bytes, s.cpu)
			}
		}
	}
}
