package registry_test

// Tests of the listings' pages, entity tags, gzip and changed_since (docs/protocol.md §5.1).

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/httpapi"
)

// rawGet sends a GET with the given headers through a client that leaves Accept-Encoding
// and the answer's encoding alone.
func (h *harness) rawGet(path string, header ...string) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest("GET", h.srv.URL+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer c.CloseIdleConnections()
	return testkit.Do(h.t, c, req)
}

// registerMany registers n nodes labelled prefix0… one second apart, each with a region
// of two and the capabilities of three, and returns them.
func (h *harness) registerMany(prefix string, n int) []node {
	h.t.Helper()
	out := make([]node, n)
	for i := range out {
		out[i] = newNode(h.t, fmt.Sprintf("%s%d", prefix, i))
		r := out[i].registration(h.t, fmt.Sprintf("203.0.113.%d:%d", i%250, 7000+i))
		r.Region = []string{"eu-west", "us-east"}[i%2]
		r.Capabilities = [][]string{{"inference"}, {"inference", "storage"}, {"relay"}}[i%3]
		r.Signature = signedReg(h.t, out[i], r)
		h.ok("POST", "/api/v1/register", r, "", nil)
		h.clock.Advance(time.Second)
	}
	return out
}

// TestListingsUnchanged: without the new parameters and headers each listing is, byte for
// byte, what encoding/json makes of the records the filter keeps, as before pages existed.
func TestListingsUnchanged(t *testing.T) {
	h := newHarness(t)
	h.registerMany("n", 12)
	for _, q := range []string{"", "region=eu-west", "capability=storage&online_within=5", "callable=1", "online_within=0"} {
		f, err := api.ParseNodeFilter(mustQuery(t, q))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := h.svc.Nodes(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		views := []api.NodeView{}
		var peers strings.Builder
		for _, n := range recs {
			views = append(views, answers.NodeView(n))
			fmt.Fprintf(&peers, "%s %s %s\n", n.DID, n.Key.Base58(), n.Endpoint)
		}
		nodes, _ := json.Marshal(struct {
			Count int            `json:"count"`
			Nodes []api.NodeView `json:"nodes"`
		}{len(views), views})
		env, _ := json.Marshal(struct {
			OK    bool           `json:"ok"`
			Data  []api.NodeView `json:"data"`
			Error any            `json:"error"`
		}{true, views, nil})
		for path, want := range map[string]string{"/nodes": string(nodes) + "\n", "/api/v1/peers": string(env) + "\n", "/peers": peers.String()} {
			resp, body := h.rawGet(path + "?" + q)
			if resp.StatusCode != 200 || string(body) != want {
				t.Errorf("%s?%s: %d\n%s\nwant\n%s", path, q, resp.StatusCode, body, want)
			}
			if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Link") != "" || resp.Header.Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Errorf("%s?%s: headers %v", path, q, resp.Header)
			}
		}
	}
}

// TestListingsAfterHeartbeats: a listing taken after heartbeats alone (a new snapshot of
// the same records in the same order) is what encoding/json makes of the records, as is one after a
// registration; /peers is unchanged by heartbeats.
func TestListingsAfterHeartbeats(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("p", 10)
	_, peers := h.rawGet("/peers")
	for round, beat := range [][]int{{0, 3}, {3, 9}, {}, {1, 2, 5, 8}, {0}} {
		h.clock.Advance(2 * time.Second)
		for _, i := range beat {
			h.ok("POST", "/api/v1/heartbeat", nodes[i].heartbeat(t, nodes[i].did, h.now()), "", nil)
		}
		if round == 2 {
			nodes = append(nodes, h.registerMany("q", 1)...)
			_, peers = h.rawGet("/peers")
		}
		recs, err := h.svc.Nodes(context.Background(), api.NodeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		views := []api.NodeView{}
		for _, n := range recs {
			views = append(views, answers.NodeView(n))
		}
		want, _ := json.Marshal(struct {
			Count int            `json:"count"`
			Nodes []api.NodeView `json:"nodes"`
		}{len(views), views})
		if _, got := h.rawGet("/nodes"); string(got) != string(want)+"\n" {
			t.Errorf("round %d: /nodes\n%s\nwant\n%s", round, got, want)
		}
		if _, got := h.rawGet("/peers"); !bytes.Equal(got, peers) {
			t.Errorf("round %d: /peers changed by heartbeats:\n%s", round, got)
		}
	}
}

func mustQuery(t *testing.T, q string) url.Values {
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestListingsGzip: a client accepting gzip gets the same bytes compressed, with a tag of
// their own; the ratio on realistic records is logged and held to a floor.
func TestListingsGzip(t *testing.T) {
	h := newHarness(t)
	h.registerMany("g", 300)
	for _, path := range []string{"/nodes", "/api/v1/peers", "/peers", "/nodes?region=us-east&limit=50"} {
		plain, want := h.rawGet(path)
		resp, gz := h.rawGet(path, "Accept-Encoding", "br, gzip;q=0.8")
		if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%s: headers %v", path, resp.Header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: gzip form decodes to %d bytes (%v), want the %d of the plain answer", path, len(got), err, len(want))
		}
		ratio := float64(len(want)) / float64(len(gz))
		t.Logf("%s: %d bytes, gzip %d: ratio %.2f", path, len(want), len(gz), ratio)
		// /peers is mostly base58 keys, which compress least.
		if floor := map[bool]float64{true: 1.5, false: 2.5}[strings.HasPrefix(path, "/peers")]; ratio < floor {
			t.Errorf("%s: gzip ratio %.2f, want at least %.1f", path, ratio, floor)
		}
		if tag, gzTag := plain.Header.Get("ETag"), resp.Header.Get("ETag"); tag == "" || gzTag != strings.TrimSuffix(tag, `"`)+`-gzip"` {
			t.Errorf("%s: ETag %q, gzip ETag %q", path, tag, gzTag)
		}
		if _, again := h.rawGet(path, "Accept-Encoding", "gzip"); !bytes.Equal(again, gz) {
			t.Errorf("%s: a second gzip answer differs from the first", path)
		}
		if resp, _ := h.rawGet(path, "Accept-Encoding", "gzip;q=0, identity"); resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: gzip sent to a client that refused it", path)
		}
	}
}

// TestListingsNotModified: an answer's tag brings 304 and no body until the answer changes:
// a heartbeat changes the whole listing's tag but not that of a filter it leaves alone.
func TestListingsNotModified(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("m", 6)
	for _, path := range []string{"/nodes", "/peers", "/api/v1/peers", "/nodes?region=eu-west", "/peers?limit=2"} {
		resp, _ := h.rawGet(path)
		tag := resp.Header.Get("ETag")
		for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, strings.TrimSuffix(tag, `"`) + `-gzip"`} {
			r304, body := h.rawGet(path, "If-None-Match", inm)
			if r304.StatusCode != http.StatusNotModified || len(body) != 0 || r304.Header.Get("ETag") != tag {
				t.Errorf("%s If-None-Match %s: %d, %d bytes, ETag %q", path, inm, r304.StatusCode, len(body), r304.Header.Get("ETag"))
			}
		}
		if r, _ := h.rawGet(path, "If-None-Match", `"other"`); r.StatusCode != 200 {
			t.Errorf("%s: another tag answered %d", path, r.StatusCode)
		}
	}
	whole, _ := h.rawGet("/nodes")
	east, _ := h.rawGet("/nodes?region=us-east")
	if whole.Header.Get("ETag") == east.Header.Get("ETag") {
		t.Fatal("two filters share a tag")
	}
	h.clock.Advance(time.Second)
	h.ok("POST", "/api/v1/heartbeat", nodes[0].heartbeat(t, nodes[0].did, h.now()), "", nil) // eu-west
	if r, _ := h.rawGet("/nodes", "If-None-Match", whole.Header.Get("ETag")); r.StatusCode != 200 {
		t.Errorf("/nodes after a heartbeat: %d, want 200", r.StatusCode)
	}
	if r, _ := h.rawGet("/nodes?region=us-east", "If-None-Match", east.Header.Get("ETag")); r.StatusCode != http.StatusNotModified {
		t.Errorf("/nodes?region=us-east after a heartbeat in eu-west: %d, want 304", r.StatusCode)
	}

	oh, _, token := newLoggedIn(t)
	resp, _ := oh.rawGet("/v1/operator/me/nodes", "Authorization", "Bearer "+token)
	if r, body := oh.rawGet("/v1/operator/me/nodes", "Authorization", "Bearer "+token, "If-None-Match", resp.Header.Get("ETag")); r.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("/v1/operator/me/nodes with its tag: %d %s", r.StatusCode, body)
	}
}

// TestListingsOnlineFollowsTheClock: a listing of the nodes online changes as the clock
// passes their window, with no change to the table, and its tag with it: a watcher holding
// the earlier tag is not told 304 for a listing that now leaves a node out.
func TestListingsOnlineFollowsTheClock(t *testing.T) {
	h := newHarness(t)
	h.registerMany("c", 2)
	path := "/nodes?online_within=60"
	before, body := h.rawGet(path)
	if !strings.Contains(string(body), `"count":2`) {
		t.Fatalf("both nodes online at first: %s", body)
	}
	h.clock.Advance(59 * time.Second) // the first node leaves the window; the second is on its edge
	after, body := h.rawGet(path, "If-None-Match", before.Header.Get("ETag"))
	if after.StatusCode != http.StatusOK || !strings.Contains(string(body), `"count":1`) {
		t.Fatalf("a minute later: %d %s, want 200 with one node", after.StatusCode, body)
	}
}

// TestListingsChangedSince: after heartbeats, changed_since keeps the nodes seen since and
// the nodes registered since, with every filter and with pages.
func TestListingsChangedSince(t *testing.T) {
	h := newHarness(t)
	nodes := h.registerMany("c", 8)
	h.clock.Advance(time.Minute)
	since := h.now()
	for _, i := range []int{1, 4, 6} {
		h.ok("POST", "/api/v1/heartbeat", nodes[i].heartbeat(t, nodes[i].did, h.now()), "", nil)
	}
	h.clock.Advance(time.Second)
	late := h.registerMany("late", 1)[0]
	q := "changed_since=" + canonical.FormatTime(since)
	if got := dids(h.pages(t, "/nodes?"+q)); got != dids2(nodes[1], nodes[4], nodes[6], late) {
		t.Errorf("changed since: %s", got)
	}
	if got := dids(h.pages(t, "/nodes?region=us-east&limit=1&"+q)); got != dids2(nodes[1]) {
		t.Errorf("changed since in us-east: %s", got) // 1 is us-east; 4, 6 eu-west; late eu-west
	}
	if got := dids(h.pages(t, "/nodes?limit=1&"+q)); got != dids2(nodes[1], nodes[4], nodes[6], late) {
		t.Errorf("changed since, one a page: %s", got)
	}
	_, peers := h.rawGet("/peers?" + q)
	if n := strings.Count(string(peers), "\n"); n != 4 {
		t.Errorf("/peers changed since: %d lines\n%s", n, peers)
	}
	_, future := h.rawGet("/nodes?changed_since=" + canonical.FormatTime(h.now().Add(time.Hour)))
	if string(future) != `{"count":0,"nodes":[]}`+"\n" {
		t.Errorf("changed since the future: %s", future)
	}
}

func dids(views []api.NodeView) string {
	var s []string
	for _, v := range views {
		s = append(s, v.DID)
	}
	return strings.Join(s, " ")
}

func dids2(ns ...node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.did)
	}
	return strings.Join(s, " ")
}

// pages follows path's cursors to the end and returns the records in the order served,
// checking on the way that each page's next field, Link header and count agree.
func (h *harness) pages(t *testing.T, path string) []api.NodeView {
	t.Helper()
	var all []api.NodeView
	for range 10_000 {
		resp, body := h.rawGet(path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		var page struct {
			Count int            `json:"count"`
			Nodes []api.NodeView `json:"nodes"`
			Next  string         `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		if page.Count != len(page.Nodes) {
			t.Fatalf("%s: count %d for %d records", path, page.Count, len(page.Nodes))
		}
		all = append(all, page.Nodes...)
		link := resp.Header.Get("Link")
		if page.Next == "" {
			if link != "" {
				t.Fatalf("%s: Link %q on the last page", path, link)
			}
			return all
		}
		target, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		u, err := url.Parse(target)
		if !ok || err != nil || u.Query().Get("cursor") != page.Next {
			t.Fatalf("%s: Link %q does not name the cursor %q", path, link, page.Next)
		}
		path = target
	}
	t.Fatal("pages never end")
	return nil
}

// TestListingsBadPage: limits outside the bound, cursors the registry did not give and
// timestamps of another form are BAD_REQUEST on every listing.
func TestListingsBadPage(t *testing.T) {
	h := newHarness(t)
	for _, q := range []string{"limit=0", "limit=10001", "limit=-1", "limit=abc", "limit=1&limit=2", "cursor=", "cursor=!!", "cursor=AAAA",
		"changed_since=2025-01-15", "changed_since=2025-01-15T10:30:00.5Z", "changed_since=1736937000"} {
		for _, path := range []string{"/nodes", "/peers", "/api/v1/peers"} {
			h.fails("GET", path+"?"+q, nil, "", http.StatusBadRequest, "BAD_REQUEST")
		}
	}
}

// TestListingPagesWhileRegistering is a property: whatever the page size and filter, the
// pages a client follows while others register new nodes and re-register and heartbeat old
// ones hold every node that was there when it began exactly once, in listing order, and no
// node twice.
//
// Each check adds nodes to the table; once it holds pagesTableBound the next check starts
// from a fresh one, so that the checks page through tables of one range of sizes rather
// than the last ones through everything every check before them added.
func TestListingPagesWhileRegistering(t *testing.T) {
	const base, pagesTableBound = 40, 200
	fresh := func() *harness {
		h := newHarness(t, registerAddressLimit(1<<30))
		h.registerMany("base", base)
		return h
	}
	table, stored := fresh(), base
	var label atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		if stored >= pagesTableBound {
			table.close()
			table, stored = fresh(), base
		}
		h := table
		limit := rapid.IntRange(1, 15).Draw(rt, "limit")
		filter := rapid.SampledFrom([]string{"", "&region=eu-west", "&capability=inference", "&online_within=100000"}).Draw(rt, "filter")
		added := rapid.IntRange(0, 20).Draw(rt, "added")
		stored += added
		before := h.pagesQuiet(rt, "/nodes?limit=10000"+filter)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range added {
				if i%4 == 1 {
					old := before[i%len(before)]
					h.do("POST", "/api/v1/register", api.RegisterRequest{DID: old.DID, PublicKey: old.PublicKey, Endpoint: "198.51.100.2:9"}, "")
				}
				n := newNode(t, fmt.Sprintf("extra%d", label.Add(1)))
				h.do("POST", "/api/v1/register", n.registration(t, "198.51.100.1:9"), "")
				if i%3 == 0 {
					h.clock.Advance(time.Second)
				}
			}
		}()
		got := h.pagesQuiet(rt, fmt.Sprintf("/nodes?limit=%d%s", limit, filter))
		wg.Wait()
		seen := map[string]bool{}
		for i, v := range got {
			if seen[v.PublicKey] {
				rt.Fatalf("%s served twice", v.DID)
			}
			seen[v.PublicKey] = true
			if i > 0 && (v.FirstSeen < got[i-1].FirstSeen || v.FirstSeen == got[i-1].FirstSeen && v.PublicKey < got[i-1].PublicKey) {
				rt.Fatalf("%s served out of order", v.DID)
			}
		}
		for _, v := range before {
			if !seen[v.PublicKey] {
				rt.Fatalf("%s, listed before, missing from the pages", v.DID)
			}
		}
	})
}

// pagesQuiet follows cursors as pages does, reporting to rt.
func (h *harness) pagesQuiet(rt *rapid.T, path string) []api.NodeView {
	var all []api.NodeView
	client := &http.Client{}
	for {
		resp, err := client.Get(h.srv.URL + path)
		if err != nil {
			rt.Fatal(err)
		}
		var page struct {
			Nodes []api.NodeView `json:"nodes"`
			Next  string         `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			rt.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		all = append(all, page.Nodes...)
		if page.Next == "" {
			return all
		}
		q, _ := url.ParseQuery(strings.SplitN(path, "?", 2)[1])
		q.Set("cursor", page.Next)
		path = "/nodes?" + q.Encode()
	}
}

// TestListingsCORS: a page on an allowed origin may read the tag and the next link, and the
// answer varies by both origin and encoding.
func TestListingsCORS(t *testing.T) {
	h := newHarness(t)
	h.registerMany("x", 3)
	srv := httptest.NewServer(httpapi.New(h.svc, httpapi.WithCORSOrigins("https://app.example")))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/nodes?limit=1", nil)
	req.Header.Set("Origin", "https://app.example")
	resp, _ := testkit.Do(t, srv.Client(), req)
	if vary := strings.Join(resp.Header.Values("Vary"), ","); !strings.Contains(vary, "Origin") || !strings.Contains(vary, "Accept-Encoding") {
		t.Errorf("Vary %q", vary)
	}
	if got := resp.Header.Get("Access-Control-Expose-Headers"); got != "ETag, Link" || resp.Header.Get("Link") == "" {
		t.Errorf("Access-Control-Expose-Headers %q, Link %q", got, resp.Header.Get("Link"))
	}
}
