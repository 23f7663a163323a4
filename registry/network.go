package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/registry/api"
	"github.com/svrp/svrp/store"
)

// The network at a glance (GET /v1/network/stats, docs/protocol.md §5.1): counts of the
// node table now, and a history sampled each minute.
//
// The history is a few series, each a ring of a fixed number of steps, so it takes the same
// memory and store space whatever the network's size or the daemon's age. Each step is kept
// in the store as a counter (the generic windowed count of the store: Count is the value,
// Start the step's beginning) under a key that the ring reuses, so the history survives a
// restart on any durable store, daemons sharing a store share it, and the sweep removes
// steps older than the longest series. A sample merges into the step it falls in as its
// series says: daemons sharing a store each add the heartbeats they took, and write the same
// node counts.

// series is one history: a value per step over slots steps, and how a sample merges with
// what the step already holds; field names it in the answer.
type series struct {
	name  string
	field string
	step  time.Duration
	slots int
	merge func(stored, sample int) int
}

func latest(_, sample int) int   { return sample }
func sum(stored, sample int) int { return stored + sample }

// highest keeps the most nodes seen online at any sample of a step.
func highest(stored, sample int) int { return max(stored, sample) }

// networkSeries are the histories kept, in the order of a sample's values.
var networkSeries = []series{
	{"online-1m", "online_24h", time.Minute, 24 * 60, highest},
	{"online-10m", "online_7d", 10 * time.Minute, 7 * 24 * 6, highest},
	{"heartbeats-1m", "heartbeats_24h", time.Minute, 24 * 60, sum},
	{"registrations-1h", "registrations_7d", time.Hour, 7 * 24, highest},
}

// networkCounterPrefix begins the store counter of every step of every series.
const networkCounterPrefix = "network/"

// index returns the ring slot of the step that begins at at.
func (se series) index(at time.Time) int {
	return int((at.Unix() / int64(se.step/time.Second)) % int64(se.slots))
}

// slot returns the store key and the beginning of the step of se that t falls in.
func (se series) slot(t time.Time) (string, time.Time) {
	at := t.Truncate(se.step)
	return networkCounterPrefix + se.name + "/" + strconv.Itoa(se.index(at)), at
}

// keys returns the store keys of every step of se, in slot order.
func (se series) keys() []string {
	out := make([]string, se.slots)
	for i := range out {
		out[i] = networkCounterPrefix + se.name + "/" + strconv.Itoa(i)
	}
	return out
}

// networkState is the history in memory, read from the store after each sample, and the
// answer built from it and the node table.
type networkState struct {
	mu      sync.Mutex // the history: one sample's write or one load at a time
	steps   [][]store.Counter
	loaded  atomic.Bool
	version atomic.Uint64 // loads so far, so that an answer built before one is rebuilt
	sampled uint64        // touches counted into the history so far
	build   sync.Mutex    // one answer built, or one sample taken, at a time; taken before mu
	answer  atomic.Pointer[networkAnswer]
}

// networkAnswer is GET /v1/network/stats as built at one moment: the whole answer, and the
// parts the shorter answers to changed_since are put together from.
type networkAnswer struct {
	at      time.Time
	life    time.Duration // how long it is served before a request rebuilds it
	version uint64
	counts  []byte // the answer up to its history: an object without its closing brace
	history []encodedSeries
	whole   *statsBody
	mu      sync.Mutex
	short   map[int64]*statsBody // by the minute their series begin in
}

// statsBody is one answer's bytes, their tag and, once asked for, their gzip form.
type statsBody struct {
	body   []byte
	tag    string
	gzOnce sync.Once
	gz     []byte
}

func newStatsBody(body []byte) *statsBody {
	return &statsBody{body: body, tag: etagOf(func(f func([]byte)) { f(body) })}
}

func (b *statsBody) gzipped() []byte {
	b.gzOnce.Do(func() { b.gz = compress(func(f func([]byte)) { f(b.body) }) })
	return b.gz
}

// encodedSeries is one series of an answer in JSON: its opening, and its values with where
// each begins, so that its last steps can be sent alone.
type encodedSeries struct {
	head   []byte // "name":{"step":…,"end":"…","values":[
	values []byte // every value, comma-separated
	starts []int
	end    time.Time
	step   time.Duration
}

// from returns the values of the steps from the one t falls in to the end: at least the
// last, all when t is zero.
func (e *encodedSeries) from(t time.Time) []byte {
	if t.IsZero() {
		return e.values
	}
	k := int(e.end.Sub(t.Truncate(e.step))/e.step) + 1
	return e.values[e.starts[len(e.starts)-min(max(k, 1), len(e.starts))]:]
}

// SampleNetwork records the network's state in the history: the nodes online and registered
// this hour, and the heartbeats this daemon accepted since its last sample. [Service.Run]
// calls it every minute, on every registry of a shared store. The answer of GET
// /v1/network/stats is built again from the same count, so that a sample costs the page no
// pass of its own.
func (s *Service) SampleNetwork(ctx context.Context) error {
	n := &s.network
	n.build.Lock()
	defer n.build.Unlock()
	now := s.now()
	c, pass, err := s.timedCount(ctx, now)
	if err != nil {
		return err
	}
	if err := s.recordSample(ctx, now, c); err != nil {
		return err
	}
	a, err := s.buildNetworkAnswer(c, pass, now)
	if err != nil {
		return err
	}
	n.answer.Store(a)
	return nil
}

// recordSample merges the sample c, taken at now, into the history, and reads the history
// again.
func (s *Service) recordSample(ctx context.Context, now time.Time, c nodeCounts) error {
	n := &s.network
	n.mu.Lock()
	defer n.mu.Unlock()
	touches := s.touches.Load()
	beats := int(touches - n.sampled)
	values := []int{c.online, c.online, beats, c.registeredThisHour}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		for i, se := range networkSeries {
			key, at := se.slot(now)
			stored, err := tx.Counter(key)
			if err != nil {
				return err
			}
			v := values[i]
			if stored.Start.Equal(at) {
				v = se.merge(stored.Count, v)
			}
			if err := tx.PutCounter(key, store.Counter{Count: v, Start: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n.sampled = touches
	return s.loadNetworkLocked(ctx)
}

// loadNetworkLocked reads the history from the store; n.mu is held.
func (s *Service) loadNetworkLocked(ctx context.Context) error {
	n := &s.network
	var keys []string
	for _, se := range networkSeries {
		keys = append(keys, se.keys()...)
	}
	var got []store.Counter
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		got, err = tx.Counters(keys...)
		return err
	})
	if err != nil {
		return err
	}
	n.steps = n.steps[:0]
	for _, se := range networkSeries {
		n.steps = append(n.steps, got[:se.slots])
		got = got[se.slots:]
	}
	n.loaded.Store(true)
	n.version.Add(1)
	return nil
}

// nodeCounts is what one pass over the node table counts.
type nodeCounts struct {
	nodes, online, registeredThisHour int
	windows                           []int // nodes seen within each of networkWindows
	regions, capabilities, reach      map[string]*api.Group
}

// networkWindows are the windows, in seconds, the online counts are given for: the page
// lets its reader pick one.
var networkWindows = []int{60, 300, int(DefaultOnlineWindow / time.Second), 3600, 86400}

// countNodes counts the node table at now.
func (s *Service) countNodes(ctx context.Context, now time.Time) (nodeCounts, error) {
	c := nodeCounts{windows: make([]int, len(networkWindows)),
		regions: map[string]*api.Group{}, capabilities: map[string]*api.Group{}, reach: map[string]*api.Group{}}
	hour := now.Truncate(time.Hour)
	add := func(m map[string]*api.Group, name string, online bool) {
		g := m[name]
		if g == nil {
			g = &api.Group{Name: name}
			m[name] = g
		}
		g.Nodes++
		if online {
			g.Online++
		}
	}
	count := func(n *store.Node) error {
		c.nodes++
		age := now.Sub(n.LastSeen)
		online := age <= DefaultOnlineWindow
		if online {
			c.online++
		}
		for i, w := range networkWindows {
			if age <= time.Duration(w)*time.Second {
				c.windows[i]++
			}
		}
		if !n.FirstSeen.Before(hour) {
			c.registeredThisHour++
		}
		add(c.regions, n.Region, online)
		add(c.reach, Reachability(n.Endpoint), online)
		for _, cp := range n.Capabilities {
			add(c.capabilities, cp, online)
		}
		return nil
	}
	return c, s.store.ScanNodes(ctx, count)
}

// networkAnswer returns the current answer of GET /v1/network/stats. It is rebuilt — one
// pass over the node table — when it has lived its life (answerLife) or a sample came
// since; a request meanwhile reads it as built. While one is being rebuilt, others get the one
// before.
func (s *Service) networkAnswer(ctx context.Context) (*networkAnswer, error) {
	n := &s.network
	now := s.now()
	fresh := func(a *networkAnswer) bool {
		return a != nil && a.version == n.version.Load() && now.Sub(a.at) < a.life
	}
	a := n.answer.Load()
	if fresh(a) {
		return a, nil
	}
	if !n.build.TryLock() {
		if a != nil {
			return a, nil
		}
		n.build.Lock()
	}
	defer n.build.Unlock()
	if a := n.answer.Load(); fresh(a) {
		return a, nil
	}
	if !n.loaded.Load() {
		n.mu.Lock()
		err := s.loadNetworkLocked(ctx)
		n.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	c, pass, err := s.timedCount(ctx, now)
	if err != nil {
		return nil, err
	}
	a, err = s.buildNetworkAnswer(c, pass, now)
	if err != nil {
		return nil, err
	}
	n.answer.Store(a)
	return a, nil
}

// timedCount counts the node table at now, and says how long the pass took by the
// service's clock untruncated (time.Now with its monotonic reading, unless the embedder
// gives another).
func (s *Service) timedCount(ctx context.Context, now time.Time) (nodeCounts, time.Duration, error) {
	start := s.clock()
	c, err := s.countNodes(ctx, now)
	return c, s.clock().Sub(start), err
}

// buildNetworkAnswer renders the count c, taken at now in a pass that took pass, and the
// history as it stands. n.build is held, and n.mu is not.
func (s *Service) buildNetworkAnswer(c nodeCounts, pass time.Duration, now time.Time) (*networkAnswer, error) {
	n := &s.network
	life := answerLife(pass)
	v := api.NetworkCounts{
		At:           canonical.FormatTime(now),
		Nodes:        c.nodes,
		OnlineWindow: int(DefaultOnlineWindow / time.Second),
		Regions:      breakdown(c.regions),
		Capabilities: breakdown(c.capabilities),
		Reachability: breakdown(c.reach),
	}
	for i, w := range networkWindows {
		v.Online = append(v.Online, api.OnlineCount{Window: w, Nodes: c.windows[i]})
	}
	a := &networkAnswer{at: now, life: life, history: make([]encodedSeries, len(networkSeries))}
	n.mu.Lock()
	a.version = n.version.Load()
	for i, se := range networkSeries {
		a.history[i] = render(se, n.steps[i], now)
	}
	// The minute sampled last: the current one, or the one before while this one has no
	// sample yet.
	beats := networkSeries[2]
	_, minute := beats.slot(now)
	for _, at := range []time.Time{minute, minute.Add(-beats.step)} {
		if b, ok := beats.value(n.steps[2], at); ok {
			v.HeartbeatsPerMinute = &b
			break
		}
	}
	n.mu.Unlock()
	counts, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	a.counts = counts[:len(counts)-1]
	a.whole = newStatsBody(a.body(time.Time{}))
	return a, nil
}

// answerLife is how long an answer whose pass over the node table took pass is served:
// networkStatsMaxAge, or networkStatsPassShare times the pass when that is longer, and a
// minute at the most. A minute is the pace of the samples, each of which rebuilds the
// answer anyway; the cap keeps a clock that jumped during a pass from holding an answer for
// long where no one samples.
func answerLife(pass time.Duration) time.Duration {
	return min(max(networkStatsMaxAge, networkStatsPassShare*pass), time.Minute)
}

// value returns the stored value of the step of se that begins at at, if one was sampled: a
// stored step is that one when its slot and beginning agree.
func (se series) value(steps []store.Counter, at time.Time) (int, bool) {
	if slot := se.index(at); slot < len(steps) && steps[slot].Start.Equal(at) {
		return steps[slot].Count, true
	}
	return 0, false
}

// render encodes the stored steps of se as its series ending at the step now falls in.
func render(se series, steps []store.Counter, now time.Time) encodedSeries {
	_, end := se.slot(now)
	e := encodedSeries{end: end, step: se.step, starts: make([]int, se.slots)}
	e.head = fmt.Appendf(nil, `"%s":{"step":%d,"end":"%s","values":[`, se.field, int(se.step/time.Second), canonical.FormatTime(end))
	for i := range se.slots {
		if i > 0 {
			e.values = append(e.values, ',')
		}
		e.starts[i] = len(e.values)
		if v, ok := se.value(steps, end.Add(-time.Duration(se.slots-1-i)*se.step)); ok {
			e.values = strconv.AppendInt(e.values, int64(v), 10)
		} else {
			e.values = append(e.values, "null"...)
		}
	}
	return e
}

// body puts the answer together: every series from the step t falls in, whole when t is
// zero.
func (a *networkAnswer) body(t time.Time) []byte {
	size := len(a.counts) + 2
	for _, e := range a.history {
		size += 1 + len(e.head) + len(e.values) + 2
	}
	b := append(make([]byte, 0, size), a.counts...)
	for _, e := range a.history {
		b = append(b, ',')
		b = append(b, e.head...)
		b = append(b, e.from(t)...)
		b = append(b, "]}"...)
	}
	return append(b, "}\n"...)
}

// since returns the answer to changed_since t: the counts, and each series from the step
// that networkHistorySettle before t falls in, so that it holds every step that may have
// changed since an answer built at t. It is built once per answer and first minute, for
// at most networkStatsVariants of them.
func (a *networkAnswer) since(t time.Time) *statsBody {
	from := t.Add(-networkHistorySettle)
	if from.After(a.at) {
		from = a.at
	}
	from = from.Truncate(time.Minute)
	if from.Before(a.at.Add(-networkHistorySpan)) {
		return a.whole
	}
	key := from.Unix()
	a.mu.Lock()
	b := a.short[key]
	a.mu.Unlock()
	if b != nil {
		return b
	}
	b = newStatsBody(a.body(from))
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept := a.short[key]; kept != nil {
		return kept
	}
	if len(a.short) < networkStatsVariants {
		if a.short == nil {
			a.short = map[int64]*statsBody{}
		}
		a.short[key] = b
	}
	return b
}

// breakdown orders groups by size and names the networkStatsGroups largest.
func breakdown(m map[string]*api.Group) api.Breakdown {
	groups := make([]api.Group, 0, len(m))
	for _, g := range m {
		groups = append(groups, *g)
	}
	slices.SortFunc(groups, func(a, b api.Group) int {
		if c := cmp.Compare(b.Nodes, a.Nodes); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := api.Breakdown{Groups: groups}
	if len(groups) > networkStatsGroups {
		out.Groups = groups[:networkStatsGroups]
		for _, g := range groups[networkStatsGroups:] {
			out.Others.Groups++
			out.Others.Nodes += g.Nodes
			out.Others.Online += g.Online
		}
	}
	return out
}

func (h *handler) networkStats(w http.ResponseWriter, r *http.Request, _ call) {
	since, err := changedSince(r.URL.RawQuery)
	if err != nil {
		h.fail(w, err)
		return
	}
	a, err := h.s.networkAnswer(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	b := a.whole
	if !since.IsZero() {
		b = a.since(since)
	}
	gz := acceptsGzip(r)
	if conditional(w, r, b.tag, etagHeader(b.tag, gz)) {
		return
	}
	if gz {
		writeGzip(w, contentTypeJSON, b.gzipped())
		return
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.Header()["Content-Length"] = []string{strconv.Itoa(len(b.body))}
	w.Write(b.body)
}

// changedSince reads the network view's query. The console's polls send changed_since
// alone, which is read without building url.Values; any other query goes through them,
// with the same answer.
func changedSince(query string) (time.Time, error) {
	if query == "" {
		return time.Time{}, nil
	}
	if v, ok := strings.CutPrefix(query, "changed_since="); ok && !strings.ContainsAny(v, "&;") {
		unescaped, err := url.QueryUnescape(v)
		if err == nil {
			return api.ChangedSince(unescaped)
		}
	}
	// As r.URL.Query, which reads what it can of a malformed query.
	q, _ := url.ParseQuery(query)
	return api.ParseChangedSince(q)
}
