package console_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/internal/console"
	"github.com/svrp/svrp/internal/testkit"
	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/registry/client"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/registry/limits"
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

// networkStart is the registry's clock when the Network view's test begins: fixed, with the
// page's zone and language, so that the charts' times read the same on every run. The
// samples it takes cross an hour, so the latest one's readout is of the wider kind
// ("10:08 AM" against "9:43 AM") and lies against the chart's right edge.
var networkStart = time.Date(2026, time.November, 28, 9, 52, 0, 0, time.UTC)

// networkRegistry serves the console and the API of a registry on a Badger store under a
// clock the test moves, with nodes registered: 44 ordinary ones in two regions, a third of
// them under the DID's full form (the longest), and one whose region and capability are
// markup, with a long capability beside it. It returns the base URL, and the queries the
// stats were asked with. Nothing is sampled yet: the registry is young.
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
	clock := testkit.NewClock(networkStart)
	svc, err := registry.New(registry.Config{Store: cached, Clock: clock.Now, Prefix: "service", Limits: limits.Limits{RegisterAddressLimit: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	queries := &statsQueries{}
	srv := httptest.NewServer(queries.wrap(console.Mount(httpapi.New(svc), "service")))
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
		form := didkey.FormShort
		if i%3 == 0 {
			form = didkey.FormFull
		}
		n, err := client.NewNode(c, key, form)
		if err != nil {
			t.Fatal(err)
		}
		region, caps := []string{"eu-west", "us-east"}[i%2], []string{"inference"}
		if i == 44 {
			region, caps = markup, []string{"<b>x</b>", "storage-frontend"}
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
// saying what its charts will show while the registry is young; then the counts the listing
// implies, a point per sampled minute on a scale, a readout on hover and keyboard focus, bars,
// and a table that fits the window and pages through the listing, filters, searches and
// sorts, showing a node's markup as text. It pauses while the tab is hidden. Screenshots at
// desktop and phone sizes are kept.
func TestConsoleNetworkView(t *testing.T) {
	ctx, _ := browser(t)
	base, svc, clock, queries := networkRegistry(t)
	shots := shotsDir(t)
	if err := run(ctx,
		emulation.SetTimezoneOverride("UTC"),
		emulation.SetLocaleOverride().WithLocale("en-US"),
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`body[data-ready="yes"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#view-network[data-updated]`, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("opening the console: %v (status %q)", err, textNow(ctx, "#net-status"))
	}
	if !visible(t, ctx, "#view-network") || visible(t, ctx, "#view-login") {
		t.Fatal("the console does not open on the Network view")
	}

	// Focus starts on the view's heading, for a screen reader, which wears no ring.
	heading := evaluate[struct{ Focused, Outline string }](t, ctx, `(() => {
		const h = document.getElementById('h-network');
		return { Focused: document.activeElement.id + (h.matches(':focus') ? ' :focus' : ''), Outline: getComputedStyle(h).outlineStyle };
	})()`)
	if heading.Focused != "h-network :focus" || heading.Outline != "none" {
		t.Errorf("at load the focus is on %q with the outline %q; want h-network :focus, none", heading.Focused, heading.Outline)
	}
	// "Updated" reads as a clock, and holds the registry's instant exactly.
	updated := evaluate[struct{ Text, DateTime, At string }](t, ctx, `(() => {
		const t = document.querySelector('#net-status time') || {};
		return { Text: document.getElementById('net-status').textContent, DateTime: t.dateTime || '', At: document.getElementById('view-network').dataset.updated };
	})()`)
	if regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:`).MatchString(updated.Text) || !strings.HasPrefix(updated.Text, "Updated at ") || updated.DateTime != updated.At {
		t.Errorf("the status reads %q with the time %q; want a clock, not the instant %s, and the instant in its datetime", updated.Text, updated.DateTime, updated.At)
	}

	// Before the first sample every chart says what will appear there.
	for _, chart := range []string{"#chart-online", "#chart-heartbeats", "#chart-registrations"} {
		if got := textOf(t, ctx, chart+" .chart-empty"); !strings.HasPrefix(got, "No samples yet.") || !strings.Contains(got, "the first point appears here within") {
			t.Errorf("%s on a young registry says %q", chart, got)
		}
		if visible(t, ctx, chart+" svg") {
			t.Errorf("%s draws an empty chart beside its note", chart)
		}
	}
	screenshots(t, ctx, shots, "network-young")

	// The registry samples: a point per sampled minute appears within a refresh.
	const sampled = 7
	for range sampled {
		clock.Advance(time.Minute)
		if err := svc.SampleNetwork(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, ctx, fmt.Sprintf(`document.querySelectorAll('#chart-online .points circle').length === %d && !document.querySelector('#chart-online svg').hasAttribute('hidden')`, sampled))

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

	// One more point after the clock moves a minute and it samples.
	clock.Advance(time.Minute)
	if err := svc.SampleNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, fmt.Sprintf(`document.querySelectorAll('#chart-online .points circle').length === %d`, sampled+1))
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
	// The period toggle shows which period is drawn.
	pressed := func() (string, string) {
		v := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#online-range button')].map((b) => b.getAttribute('aria-pressed') + ' ' + getComputedStyle(b).backgroundColor)`)
		return v[0], v[1]
	}
	day, week := pressed()
	clickThen(t, ctx, `#online-range [data-range="7d"]`, `document.querySelector('#chart-online svg').getAttribute('aria-label').startsWith('Online nodes, 7 days')`)
	day7, week7 := pressed()
	if !strings.HasPrefix(day, "true ") || !strings.HasPrefix(week, "false ") || !strings.HasPrefix(day7, "false ") || !strings.HasPrefix(week7, "true ") ||
		day[5:] == week[6:] || day[5:] != week7[5:] {
		t.Errorf("the toggle (aria-pressed and background of 24 hours, 7 days): %q, %q; after choosing 7 days %q, %q", day, week, day7, week7)
	}
	clickThen(t, ctx, `#online-range [data-range="24h"]`, `document.querySelector('#chart-online svg').getAttribute('aria-label').startsWith('Online nodes, 24 hours')`)

	// The chart's scale, and a readout of a sample on hover and on keyboard focus.
	if got := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#chart-online .y-label')].map((e) => e.textContent)`); len(got) < 2 || got[0] != "0" {
		t.Errorf("the online chart's y axis reads %q; want 0 and the values above it", got)
	}
	readout := `(() => { const r = document.getElementById('chart-online-readout'); return r.hidden ? '' : r.textContent; })()`
	// In the right margin, past the last step: the nearest sample is the latest.
	edge := evaluate[struct{ X, Y float64 }](t, ctx, `(() => { const r = document.querySelector('#chart-online svg').getBoundingClientRect(); return { X: r.right - 4, Y: r.y + r.height / 2 }; })()`)
	if err := run(ctx, chromedp.MouseEvent(input.MouseMoved, edge.X, edge.Y)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, readout+` !== ''`)
	hovered := evaluate[string](t, ctx, readout)
	if !strings.HasSuffix(hovered, fmt.Sprintf(": %d online", listedCount(t, base, "online_within=600"))) {
		t.Errorf("hovering over the latest sample reads %q", hovered)
	}
	inside := evaluate[bool](t, ctx, `(() => { const r = document.getElementById('chart-online-readout').getBoundingClientRect(), b = document.querySelector('#chart-online .chart-plot').getBoundingClientRect(); return r.left >= b.left && r.right <= b.right; })()`)
	if !inside {
		t.Error("the readout leaves its chart")
	}
	if err := run(ctx, chromedp.MouseEvent(input.MouseMoved, 1, 1)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, readout+` === ''`)
	if err := run(ctx, chromedp.Focus("#chart-online svg", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, readout+` !== ''`)
	// End goes to the latest sample, and the left arrow to the one before it.
	if err := run(ctx, chromedp.KeyEvent(kb.End)); err != nil {
		t.Fatal(err)
	}
	if got := evaluate[string](t, ctx, readout); got != hovered {
		t.Errorf("the latest sample reads %q on focus and %q on hover", got, hovered)
	}
	latest := hovered
	if err := run(ctx, chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, fmt.Sprintf(`%s !== '' && %s !== %q`, readout, readout, latest))
	screenshots(t, ctx, shots, "network-readout")
	if got := evaluate[string](t, ctx, readout); got == "" || got == latest {
		t.Errorf("after the screenshots the focused chart reads %q (the latest sample was %q)", got, latest)
	}
	if err := run(ctx, chromedp.Blur("#chart-online svg", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, readout+` === ''`)

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
	if shown.Region != markup || shown.Capabilities != "<b>x</b>, storage-frontend" || shown.Elements != 0 || shown.Owned {
		t.Errorf("a node's markup: %+v", shown)
	}
	if got := textOf(t, ctx, "#bars-regions"); !strings.Contains(got, markup) {
		t.Errorf("the region bars do not show the markup region as text: %q", got)
	}
	for _, s := range []size{desktop, phone} {
		resize(t, ctx, s)
		checkReadable(t, ctx, s)
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

// checkReadable checks that the Network view reads at size s: every column header and every
// clipped value (DID, fingerprint, region) on one line with the whole value in its title,
// every breakdown name whole, and at desktop width the table within the window.
func checkReadable(t *testing.T, ctx context.Context, s size) {
	t.Helper()
	problems := evaluate[[]string](t, ctx, `(() => {
		const out = [];
		const lines = (e) => {
			const r = document.createRange();
			r.selectNodeContents(e);
			return new Set([...r.getClientRects()].map((q) => Math.round(q.top))).size;
		};
		for (const b of document.querySelectorAll('#node-head button.sort')) {
			if (lines(b) !== 1) out.push('the header ' + b.textContent + ' on ' + lines(b) + ' lines');
		}
		const clips = document.querySelectorAll('#node-rows .clip');
		if (clips.length < 3 * document.querySelectorAll('#node-rows tr').length) out.push('only ' + clips.length + ' clipped values');
		if (![...document.querySelectorAll('#node-rows td.did')].some((td) => td.textContent.length > 70)) out.push('no DID of the full form on the page');
		for (const c of clips) {
			if (lines(c) !== 1) out.push(c.textContent + ' on ' + lines(c) + ' lines');
			if (c.title !== c.textContent) out.push(c.textContent + ' titled ' + c.title);
		}
		for (const n of document.querySelectorAll('.bar-name')) {
			if (n.scrollWidth > n.clientWidth || n.scrollHeight > n.clientHeight) out.push('the breakdown name ' + n.textContent + ' is cut');
			if (n.title !== n.textContent) out.push(n.textContent + ' titled ' + n.title);
		}
		if (!document.getElementById('bars-capabilities').textContent.includes('storage-frontend')) out.push('no storage-frontend among the capabilities');
		const wrap = document.querySelector('.table-wrap');
		if (!`+fmt.Sprint(s.mobile)+` && wrap.scrollWidth > wrap.clientWidth) out.push('the table is ' + wrap.scrollWidth + ' px wide in ' + wrap.clientWidth);
		return out;
	})()`)
	for _, p := range problems {
		t.Errorf("at %s width: %s", s.name, p)
	}
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
