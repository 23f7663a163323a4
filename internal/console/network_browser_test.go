package console_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/store"
	"github.com/svrp/svrp/store/badger"
)

// markup is a region a node may register: the page must show it as these characters.
const markup = `<img src=x onerror="document.body.dataset.owned='yes'"><b>bold</b>`

// statsQueries keeps the query of every GET /v1/network/stats a server was asked.
type statsQueries struct {
	mu   sync.Mutex
	seen []string
}

func (q *statsQueries) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/network/stats" {
			q.mu.Lock()
			q.seen = append(q.seen, r.URL.RawQuery)
			q.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (q *statsQueries) all() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.seen)
}

// networkRegistry serves the console and the API of a registry on a Badger store under a
// clock the test moves, with nodes registered: 44 ordinary ones in two regions and one whose
// region and capability are markup. It returns the base URL, and the queries the stats were
// asked with.
func networkRegistry(t *testing.T) (string, *registry.Service, *testkit.Clock, *statsQueries) {
	t.Helper()
	st, err := badger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cached, err := store.WithNodeCache(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	clock := testkit.NewClock(time.Now().UTC().Truncate(time.Minute))
	svc, err := registry.New(registry.Config{Store: cached, Clock: clock.Now, Prefix: "service", Limits: registry.Limits{RegisterAddressLimit: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	queries := &statsQueries{}
	srv := httptest.NewServer(queries.wrap(console.Mount(registry.NewHandler(svc), "service")))
	t.Cleanup(func() {
		srv.Close()
		cached.Close()
	})
	c, err := client.New(srv.URL, client.WithClock(clock.Now), client.WithPrefix("service"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 45 {
		_, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := client.NewNode(c, key, didkey.FormShort)
		if err != nil {
			t.Fatal(err)
		}
		region, caps := []string{"eu-west", "us-east"}[i%2], []string{"inference"}
		if i == 44 {
			region, caps = markup, []string{"<b>x</b>"}
		}
		if _, err := n.Register(ctx, fmt.Sprintf("203.0.113.%d:7000", i+1), caps, region); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 {
			clock.Advance(time.Second)
		}
	}
	return srv.URL, svc, clock, queries
}

// listedCount is the count GET /nodes answers with query q.
func listedCount(t *testing.T, base, q string) int {
	t.Helper()
	resp, body := testkit.Get(t, base+"/nodes?"+q)
	var l struct {
		Count int `json:"count"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &l) != nil {
		t.Fatalf("/nodes?%s: %d %s", q, resp.StatusCode, body)
	}
	return l.Count
}

// TestConsoleNetworkView opens the console without logging in: the Network view comes first,
// with the counts the listing implies, a point per sampled minute, bars, and a table that
// pages through the listing, filters, searches and sorts, showing a node's markup as text.
// It pauses while the tab is hidden. Screenshots at desktop and phone sizes are kept.
func TestConsoleNetworkView(t *testing.T) {
	ctx, _ := browser(t)
	base, svc, clock, queries := networkRegistry(t)
	shots := shotsDir(t)
	const sampled = 7
	for range sampled {
		clock.Advance(time.Minute)
		if err := svc.SampleNetwork(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="yes"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#view-network[data-updated]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("opening the console: %v (status %q)", err, textNow(ctx, "#net-status"))
	}
	if !visible(t, ctx, "#view-network") || visible(t, ctx, "#view-login") {
		t.Fatal("the console does not open on the Network view")
	}

	// The counts are those of the listings.
	if got, want := textOf(t, ctx, "#stat-nodes"), fmt.Sprint(listedCount(t, base, "")); got != want {
		t.Errorf("nodes registered: %s, the listing has %s", got, want)
	}
	if got, want := textOf(t, ctx, "#stat-online"), fmt.Sprint(listedCount(t, base, "online_within=600")); got != want {
		t.Errorf("online within 10 minutes: %s, the listing has %s", got, want)
	}
	choose(t, ctx, "#net-window", "300")
	if got, want := textOf(t, ctx, "#stat-online"), fmt.Sprint(listedCount(t, base, "online_within=300")); got != want {
		t.Errorf("online within 5 minutes: %s, the listing has %s", got, want)
	}

	// A point per sampled minute; one more after the clock moves a minute and it samples.
	if n := count(t, ctx, "#chart-online circle"); n != sampled {
		t.Errorf("the day's chart has %d points, want %d", n, sampled)
	}
	clock.Advance(time.Minute)
	if err := svc.SampleNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, fmt.Sprintf(`document.querySelectorAll('#chart-online circle').length === %d`, sampled+1))
	// After its first answer the view asks only for what changed since, and the history it
	// puts together is the registry's whole one.
	if q := queries.all(); len(q) < 2 || q[0] != "" || !strings.HasPrefix(q[len(q)-1], "changed_since=") {
		t.Errorf("the stats were asked with the queries %q: want the whole answer first, then changed_since", q)
	}
	var whole api.NetworkStats
	if _, body := testkit.Get(t, base+"/v1/network/stats"); json.Unmarshal(body, &whole) != nil {
		t.Fatalf("the stats: %s", body)
	}
	for sel, s := range map[string]struct {
		what   string
		series api.Series
	}{
		"#chart-online svg":     {"Online nodes, 24 hours", whole.Online24h},
		"#chart-heartbeats svg": {"Heartbeats per minute, 24 hours", whole.Heartbeats24h},
	} {
		var label string
		if err := run(ctx, chromedp.AttributeValue(sel, "aria-label", &label, nil, chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
		if want := chartLabel(s.what, s.series); label != want {
			t.Errorf("%s: %q, the registry's history gives %q", sel, label, want)
		}
	}
	if n := count(t, ctx, "#bars-regions li"); n != 3 {
		t.Errorf("%d region bars, want 3", n)
	}

	// The table: pages of 20 through the listing's cursors, in listing order.
	dids := func() []string {
		return evaluate[[]string](t, ctx, `[...document.querySelectorAll('#node-rows td.did')].map((td) => td.textContent)`)
	}
	var listing struct {
		Nodes []struct {
			DID    string  `json:"did"`
			Region *string `json:"region"`
		} `json:"nodes"`
	}
	_, body := testkit.Get(t, base+"/nodes")
	if err := json.Unmarshal(body, &listing); err != nil {
		t.Fatal(err)
	}
	var paged []string
	for page := range 3 {
		got := dids()
		if want := min(20, 45-20*page); len(got) != want {
			t.Fatalf("table page %d has %d rows, want %d", page+1, len(got), want)
		}
		paged = append(paged, got...)
		if page < 2 {
			clickThen(t, ctx, "#page-next", fmt.Sprintf(`document.getElementById('page-info').textContent.startsWith('Page %d:')`, page+2))
		}
	}
	for i, n := range listing.Nodes {
		if i >= len(paged) || paged[i] != n.DID {
			t.Fatalf("the table's pages differ from the listing at row %d", i)
		}
	}
	if !disabledNow(t, ctx, "#page-next") {
		t.Error("Next is enabled on the last page")
	}

	// The node whose strings are markup (registered last, so on the last page) is shown as
	// those characters.
	var shown struct {
		Region, Capabilities string
		Elements             int
		Owned                bool
	}
	if err := run(ctx, chromedp.Evaluate(`(() => {
		const row = [...document.querySelectorAll('#node-rows tr')].find((tr) => tr.children[3].textContent !== 'inference') || { children: [{}, {}, {}, {}] };
		return { Region: row.children[2].textContent, Capabilities: row.children[3].textContent,
			Elements: document.querySelectorAll('#view-network img, #view-network b').length,
			Owned: document.body.dataset.owned === 'yes' };
	})()`, &shown)); err != nil {
		t.Fatal(err)
	}
	if shown.Region != markup || shown.Capabilities != "<b>x</b>" || shown.Elements != 0 || shown.Owned {
		t.Errorf("a node's markup: %+v", shown)
	}
	if got := textOf(t, ctx, "#bars-regions"); !strings.Contains(got, markup) {
		t.Errorf("the region bars do not show the markup region as text: %q", got)
	}
	screenshots(t, ctx, shots, "network-table")

	// Back to the first page, then filter by region on the registry's side and search here.
	// Each press waits for the page it brings: the pager moves as the table re-renders.
	for page := 2; page >= 1; page-- {
		clickThen(t, ctx, "#page-prev", fmt.Sprintf(`document.getElementById('page-info').textContent.startsWith('Page %d:')`, page))
	}
	choose(t, ctx, "#table-region", "us-east")
	poll(t, ctx, `[...document.querySelectorAll('#node-rows tr')].length === 20 && [...document.querySelectorAll('#node-rows tr')].every((tr) => tr.children[2].textContent === 'us-east')`)
	target := listing.Nodes[30].DID // eu-west: index 30 is even
	choose(t, ctx, "#table-region", "")
	if err := run(ctx, chromedp.SendKeys("#node-search", target[len(target)-6:]+kb.Enter, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, fmt.Sprintf(`(() => { const d = [...document.querySelectorAll('#node-rows td.did')].map((td) => td.textContent); return d.length === 1 && d[0] === %q; })()`, target))

	// Sorting the page by DID, descending on the second press.
	choose(t, ctx, "#node-search", "")
	poll(t, ctx, `document.querySelectorAll('#node-rows tr').length === 20`)
	for _, dir := range []string{"ascending", "descending"} {
		clickThen(t, ctx, `#node-head th[data-key="did"] button`, fmt.Sprintf(`document.querySelector('#node-head th[data-key="did"]').getAttribute('aria-sort') === %q`, dir))
	}
	got := dids()
	for i := 1; i < len(got); i++ {
		if got[i-1] < got[i] {
			t.Fatalf("sorted by DID descending: %q before %q", got[i-1], got[i])
		}
	}

	// Hidden, the view stops refreshing; shown again, it refreshes at once.
	if err := run(ctx, chromedp.Evaluate(`Object.defineProperty(document, 'visibilityState', { value: 'hidden', configurable: true }); document.dispatchEvent(new Event('visibilitychange'))`, nil)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById('view-network').dataset.paused === 'yes'`)
	if err := run(ctx, chromedp.Evaluate(`Object.defineProperty(document, 'visibilityState', { value: 'visible', configurable: true }); document.dispatchEvent(new Event('visibilitychange'))`, nil)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById('view-network').dataset.paused === 'no'`)

	if err := run(ctx, chromedp.Evaluate(`window.scrollTo(0, 0)`, nil)); err != nil {
		t.Fatal(err)
	}
	screenshots(t, ctx, shots, "network")
}

// chartLabel is the label the page gives the chart of series.
func chartLabel(what string, series api.Series) string {
	var present []int
	for _, v := range series.Values {
		if v != nil {
			present = append(present, *v)
		}
	}
	if len(present) == 0 {
		return what + ": no samples yet"
	}
	return fmt.Sprintf("%s: %d samples, latest %d, highest %d", what, len(present), present[len(present)-1], max(1, slices.Max(present)))
}

// choose sets the value of a form control as a person would, with the event that follows.
func choose(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input')); })()`, sel, value)
	if err := run(ctx, chromedp.Evaluate(js, nil)); err != nil {
		t.Fatal(err)
	}
}

// evaluate returns the value of the expression js in the page.
func evaluate[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	var v T
	if err := run(ctx, chromedp.Evaluate(js, &v)); err != nil {
		t.Fatal(err)
	}
	return v
}

func visible(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	return evaluate[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && !e.closest('[hidden]'); })()`, sel))
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return evaluate[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

func disabledNow(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	return evaluate[bool](t, ctx, fmt.Sprintf(`document.querySelector(%q).disabled`, sel))
}

// clickThen clicks the element and waits until the expression js is true in the page: the
// state the click brings, before anything else is pressed.
func clickThen(t *testing.T, ctx context.Context, sel, js string) {
	t.Helper()
	if err := run(ctx, chromedp.Click(sel, chromedp.ByQuery)); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
	poll(t, ctx, js)
}

// poll waits until the expression js is true in the page; the view refreshes every few
// seconds, so a change shows within one refresh.
func poll(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting for %s: %v", js, err)
	}
}
