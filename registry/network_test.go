package registry_test

// Tests of GET /v1/network/stats and its history (network.go).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

// stats reads GET /v1/network/stats.
func (h *harness) stats() api.NetworkStats {
	h.t.Helper()
	var s api.NetworkStats
	h.ok("GET", "/v1/network/stats", nil, "", &s)
	return s
}

// sample runs a sample at the harness's clock.
func (h *harness) sample() {
	h.t.Helper()
	if err := h.svc.SampleNetwork(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// points returns the non-null values of a series.
func points(s api.Series) []int {
	var out []int
	for _, v := range s.Values {
		if v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// TestNetworkStatsCounts: the counts are what the listings imply, and the breakdowns add up.
func TestNetworkStatsCounts(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("s", 9) // nine seconds apart
	h.clock.Advance(10 * time.Minute)
	for _, i := range []int{0, 3, 5} {
		h.ok("POST", "/api/v1/heartbeat", nodes[i].heartbeat(t, nodes[i].did, h.now()), "", nil)
	}
	h.clock.Advance(30 * time.Second)
	s := h.stats()
	if s.Nodes != 9 || s.At != stamp(h.now()) || s.OnlineWindow != 600 {
		t.Fatalf("stats: %+v", s)
	}
	for _, o := range s.Online {
		var listed struct {
			Count int `json:"count"`
		}
		h.ok("GET", "/nodes?online_within="+strconv.Itoa(o.Window), nil, "", &listed)
		if o.Nodes != listed.Count {
			t.Errorf("online within %d s: %d, the listing has %d", o.Window, o.Nodes, listed.Count)
		}
	}
	want := map[string][2]int{"eu-west": {5, 1}, "us-east": {4, 2}} // heartbeats 0, 3, 5; 3 and 5 are us-east
	for _, g := range s.Regions.Groups {
		if w := want[g.Name]; w != [2]int{g.Nodes, g.Online} {
			t.Errorf("region %q: %d nodes, %d online; want %v", g.Name, g.Nodes, g.Online, w)
		}
	}
	caps := map[string]int{}
	for _, g := range s.Capabilities.Groups {
		caps[g.Name] = g.Nodes
	}
	if caps["inference"] != 6 || caps["storage"] != 3 || caps["relay"] != 3 {
		t.Errorf("capabilities %v", caps)
	}
	if len(s.Reachability.Groups) != 1 || s.Reachability.Groups[0] != (api.Group{Name: "public", Nodes: 9, Online: 3}) {
		t.Errorf("reachability %+v", s.Reachability)
	}
	if s.HeartbeatsPerMinute != nil || len(points(s.Online24h)) != 0 {
		t.Errorf("a history before any sample: %v %v", s.HeartbeatsPerMinute, points(s.Online24h))
	}
}

// TestNetworkHistory: each sampled minute is a point of the day's series, heartbeats are
// counted in the minute they were sampled in, registrations in their hour, and the answer
// is cached: the same bytes and tag until a sample or its age rebuilds it.
func TestNetworkHistory(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("h", 4)
	h.clock.Advance(time.Minute - 4*time.Second)
	for minute := range 5 {
		for i := range minute {
			h.ok("POST", "/api/v1/heartbeat", nodes[i].heartbeat(t, nodes[i].did, h.now()), "", nil)
		}
		h.sample()
		h.clock.Advance(time.Minute)
	}
	s := h.stats()
	if got := points(s.Online24h); fmt.Sprint(got) != "[4 4 4 4 4]" {
		t.Errorf("online over the day: %v, want 5 points of 4", got)
	}
	if got := points(s.Heartbeats24h); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("heartbeats per minute: %v", got)
	}
	if got := points(s.Registrations7d); len(got) != 1 || got[0] != 4 {
		t.Errorf("registrations per hour: %v", got)
	}
	if len(s.Online24h.Values) != 1440 || len(s.Online7d.Values) != 1008 || len(s.Registrations7d.Values) != 168 {
		t.Errorf("series lengths %d %d %d", len(s.Online24h.Values), len(s.Online7d.Values), len(s.Registrations7d.Values))
	}
	if s.Online24h.End != stamp(h.now().Truncate(time.Minute)) {
		t.Errorf("the day ends at %s, want the current minute", s.Online24h.End)
	}
	resp, body := h.rawGet("/v1/network/stats")
	_, again := h.rawGet("/v1/network/stats")
	if string(body) != string(again) {
		t.Error("two reads within the answer's life differ")
	}
	if r, b := h.rawGet("/v1/network/stats", "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusNotModified || len(b) != 0 {
		t.Errorf("stats with its tag: %d", r.StatusCode)
	}
	h.sample()
	if r, _ := h.rawGet("/v1/network/stats", "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusOK {
		t.Errorf("stats after a sample with the old tag: %d", r.StatusCode)
	}
}

// TestNetworkHistoryBoundedAndKept: a week and a half of samples leave at most one counter
// per ring slot in the store; a new service on the same store shows the same history; the
// sweep keeps the week and removes what is older.
func TestNetworkHistoryBoundedAndKept(t *testing.T) {
	t.Run("badger", func(t *testing.T) {
		h := newHarness(t)
		sampleWeeks(t, h.svc, h.clock)
		before := h.stats()
		checkBounded(t, h.st)
		h = h.restart()
		if after := h.stats(); !sameHistory(before, after) {
			t.Error("the history changed over a restart")
		}
		checkSwept(t, h.svc, h.st, h.clock)
	})
	t.Run("memory", func(t *testing.T) {
		if onPostgres(t) {
			t.Skip("the memory store's run does not use the harness: TestNetworkHistoryBoundedAndKept ran it already")
		}
		st := store.NewMemory()
		clock := testkit.NewClock(epoch)
		svc := newService(t, st, clock)
		sampleWeeks(t, svc, clock)
		checkBounded(t, st)
		before := answer(t, svc)
		if after := answer(t, newService(t, st, clock)); !sameHistory(before, after) {
			t.Error("a second service on the store shows another history")
		}
		checkSwept(t, svc, st, clock)
	})
}

func newService(t *testing.T, st store.Store, clock *testkit.Clock) *registry.Service {
	svc, err := registry.New(registry.Config{Store: st, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// answer reads the stats through a handler of its own.
func answer(t *testing.T, svc *registry.Service) api.NetworkStats {
	rec := httptest.NewRecorder()
	httpapi.New(svc).ServeHTTP(rec, httptest.NewRequest("GET", "/v1/network/stats", nil))
	var s api.NetworkStats
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatalf("%s: %v", rec.Body, err)
	}
	return s
}

// sampleWeeks samples every 37 minutes for ten days, and every minute of the last hour.
func sampleWeeks(t *testing.T, svc *registry.Service, clock *testkit.Clock) {
	for range 10 * 24 * 60 / 37 {
		clock.Advance(37 * time.Minute)
		if err := svc.SampleNetwork(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for range 60 {
		clock.Advance(time.Minute)
		if err := svc.SampleNetwork(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// checkBounded: the store holds at most one counter per ring slot.
func checkBounded(t *testing.T, st store.Store) {
	t.Helper()
	n := historyCounters(t, st)
	if slots := 1440 + 1008 + 1440 + 168; n == 0 || n > slots {
		t.Errorf("%d history counters in the store, want 1 to %d", n, slots)
	}
}

// checkSwept: a sweep now keeps the history; a sweep eight days on, with no sample since,
// leaves none of it.
func checkSwept(t *testing.T, svc *registry.Service, st store.Store, clock *testkit.Clock) {
	t.Helper()
	if err := svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := points(answer(t, newService(t, st, clock)).Online24h); len(got) != 60+24*60/37 {
		t.Errorf("after a sweep the day has %d points, want %d", len(got), 60+24*60/37)
	}
	clock.Advance(8 * 24 * time.Hour)
	if err := svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := historyCounters(t, st); n != 0 {
		t.Errorf("%d history counters older than a week left after a sweep", n)
	}
}

func sameHistory(a, b api.NetworkStats) bool {
	ja, _ := json.Marshal([]api.Series{a.Online24h, a.Online7d, a.Heartbeats24h, a.Registrations7d})
	jb, _ := json.Marshal([]api.Series{b.Online24h, b.Online7d, b.Heartbeats24h, b.Registrations7d})
	return string(ja) == string(jb) && len(points(a.Online7d)) > 0
}

// historyCounters counts the counters the history keeps in st.
func historyCounters(t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	err := st.View(context.Background(), func(tx store.Tx) error {
		return tx.EachCounter(func(key string, _ store.Counter) error {
			if strings.HasPrefix(key, "network/") {
				n++
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNetworkStatsChangedSince: asked with changed_since the at of an answer held, the
// registry answers the counts whole and each series from a few steps before; laid over the
// answer held, as the console does, they give the whole answer of now, also across a sample
// taken meanwhile, a minute boundary, and an hour's.
func TestNetworkStatsChangedSince(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("c", 3)
	// To two minutes before an hour begins.
	h.clock.Advance((2*time.Hour - 2*time.Minute - h.now().Sub(h.now().Truncate(time.Hour))) % time.Hour)
	for range 3 {
		h.sample()
		h.clock.Advance(time.Minute)
	}
	held := h.stats()
	for range 3 {
		h.ok("POST", "/api/v1/heartbeat", nodes[0].heartbeat(t, nodes[0].did, h.now()), "", nil)
		h.clock.Advance(20 * time.Second)
		h.sample()
		var short api.NetworkStats
		h.ok("GET", "/v1/network/stats?changed_since="+held.At, nil, "", &short)
		whole := h.stats()
		if !reflect.DeepEqual(short.NetworkCounts, whole.NetworkCounts) {
			t.Fatalf("counts since %s: %+v, the whole answer's %+v", held.At, short.NetworkCounts, whole.NetworkCounts)
		}
		if n := len(short.Online24h.Values); n < 1 || n > 5 {
			t.Errorf("the day's series since %s holds %d steps", held.At, n)
		}
		merged := held
		merged.NetworkCounts = short.NetworkCounts
		for _, s := range []struct{ held, short *api.Series }{
			{&merged.Online24h, &short.Online24h}, {&merged.Online7d, &short.Online7d},
			{&merged.Heartbeats24h, &short.Heartbeats24h}, {&merged.Registrations7d, &short.Registrations7d},
		} {
			*s.held = overlay(t, *s.held, *s.short)
		}
		if !sameHistory(merged, whole) {
			t.Fatalf("the answer held with what changed since %s laid over it is not the whole answer", held.At)
		}
		held = whole
	}

	// Long ago: the whole answer. Later than the answer: each series's last step.
	var long, later api.NetworkStats
	h.ok("GET", "/v1/network/stats?changed_since="+stamp(h.now().Add(-30*24*time.Hour)), nil, "", &long)
	if !sameHistory(long, h.stats()) || len(long.Online7d.Values) != 1008 {
		t.Error("changed_since a month ago is not the whole answer")
	}
	h.ok("GET", "/v1/network/stats?changed_since="+stamp(h.now().Add(time.Hour)), nil, "", &later)
	for _, v := range [][]*int{later.Online24h.Values, later.Online7d.Values, later.Heartbeats24h.Values, later.Registrations7d.Values} {
		if len(v) != 1 {
			t.Errorf("changed_since an hour ahead: %d steps, want the last", len(v))
		}
	}

	// A shorter answer is tagged and compressed as the whole one.
	path := "/v1/network/stats?changed_since=" + held.At
	resp, body := h.rawGet(path)
	if r, b := h.rawGet(path, "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusNotModified || len(b) != 0 {
		t.Errorf("the shorter answer with its tag: %d", r.StatusCode)
	}
	if _, whole := h.rawGet("/v1/network/stats"); len(body)*4 > len(whole) {
		t.Errorf("the shorter answer has %d bytes, the whole one %d", len(body), len(whole))
	}
	gz, zbody := h.rawGet(path, "Accept-Encoding", "gzip")
	if gz.Header.Get("Content-Encoding") != "gzip" || gunzip(t, zbody) != string(body) {
		t.Error("the gzip form of the shorter answer differs")
	}

	for _, bad := range []string{"yesterday", "1700000000", stamp(h.now()) + "&changed_since=" + stamp(h.now())} {
		h.fails("GET", "/v1/network/stats?changed_since="+bad, nil, "", http.StatusBadRequest, "BAD_REQUEST")
	}
}

// overlay lays short, a series answered to changed_since, over held, an earlier whole one, as
// the console does: held moved to short's end, and short's steps over its last.
func overlay(t *testing.T, held, short api.Series) api.Series {
	t.Helper()
	heldEnd, _ := time.Parse(time.RFC3339, held.End)
	end, _ := time.Parse(time.RFC3339, short.End)
	shift := int(end.Sub(heldEnd) / (time.Duration(held.Step) * time.Second))
	n := len(held.Values)
	if short.Step != held.Step || shift < 0 || len(short.Values) < n && shift >= len(short.Values) {
		t.Fatalf("a series from %s to %s: steps between them are not in the answer (%d steps)", held.End, short.End, len(short.Values))
	}
	out := append(held.Values[min(shift, n):], make([]*int, min(shift, n))...)
	copy(out[n-len(short.Values):], short.Values)
	return api.Series{Step: short.Step, End: short.End, Values: out}
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestNetworkStatsLength: over a real server, every form of the answer comes with its length
// and whole, not in chunks, whether the handler sets the length or net/http counts it.
func TestNetworkStatsLength(t *testing.T) {
	h := newHarness(t)
	h.registerMany("n", 3)
	h.sample()
	srv := httptest.NewServer(httpapi.New(h.svc))
	defer srv.Close()
	plain := &http.Transport{DisableCompression: true}
	defer plain.CloseIdleConnections()
	at := h.stats().At
	for _, c := range []struct{ path, encoding string }{
		{"/v1/network/stats", ""},
		{"/v1/network/stats", "gzip"},
		{"/v1/network/stats?changed_since=" + at, "gzip"},
		{"/v1/network/stats?changed_since=" + url.QueryEscape(at), ""},
	} {
		req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
		if c.encoding != "" {
			req.Header.Set("Accept-Encoding", c.encoding)
		}
		resp, err := plain.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
			t.Errorf("%s (%q): %d, Content-Length %d for %d bytes, Transfer-Encoding %q",
				c.path, c.encoding, resp.StatusCode, resp.ContentLength, len(body), resp.TransferEncoding)
		}
	}
}

// slowScan is a store whose passes over the node table take pass on clock, counted in
// scans when it is not nil.
type slowScan struct {
	store.Store
	clock *testkit.Clock
	pass  time.Duration
	scans *atomic.Int64
}

func (s slowScan) ScanNodes(ctx context.Context, fn func(*store.Node) error) error {
	s.clock.Advance(s.pass)
	if s.scans != nil {
		s.scans.Add(1)
	}
	return s.Store.ScanNodes(ctx, fn)
}

// TestNetworkStatsSlowPass: an answer whose pass over the node table took longer than a
// hundredth of its usual life is served for a hundred passes' time, so that the passes
// asked for by anyone polling the page hold no more than a hundredth of the daemon's time
// however large the table grows; a quick pass keeps the usual five seconds.
func TestNetworkStatsSlowPass(t *testing.T) {
	for _, c := range []struct {
		pass, stale, fresh time.Duration
	}{
		// registerMany moves the clock on a second itself.
		{0, 2 * time.Second, 3 * time.Second},
		{200 * time.Millisecond, 17 * time.Second, 3 * time.Second},
	} {
		dir := t.TempDir()
		clock := testkit.NewClock(epoch)
		h := startHarness(t, slowScan{Store: openStore(t, dir), clock: clock, pass: c.pass}, dir, clock)
		h.registerMany("a", 1)
		if n := h.stats().Nodes; n != 1 {
			t.Fatalf("pass %v: %d nodes, want 1", c.pass, n)
		}
		h.registerMany("b", 1)
		clock.Advance(c.stale)
		if n := h.stats().Nodes; n != 1 {
			t.Errorf("pass %v: the answer was rebuilt within %v, with %d nodes", c.pass, c.stale+time.Second, n)
		}
		clock.Advance(c.fresh)
		if n := h.stats().Nodes; n != 2 {
			t.Errorf("pass %v: %d nodes after %v, want the answer rebuilt with 2", c.pass, n, c.stale+c.fresh+time.Second)
		}
	}
}

// TestNetworkSampleBuildsAnswer: a sample passes over the node table once, and the answer
// read after it is the one built from that count, nodes registered since the last answer
// included, with no pass of its own.
func TestNetworkSampleBuildsAnswer(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewClock(epoch)
	var scans atomic.Int64
	h := startHarness(t, slowScan{Store: openStore(t, dir), clock: clock, scans: &scans}, dir, clock)
	h.registerMany("a", 1)
	h.stats()
	h.registerMany("b", 2)
	before := scans.Load()
	h.sample()
	if n := h.stats().Nodes; n != 3 {
		t.Errorf("after a sample the answer counts %d nodes, want 3", n)
	}
	if got := scans.Load() - before; got != 1 {
		t.Errorf("a sample and a read after it passed over the table %d times, want once", got)
	}
}
