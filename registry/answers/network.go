package answers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
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

// NetworkCounterPrefix begins the store counter of every step of every series: the sweep
// keeps these counters for the span of the longest series.
const NetworkCounterPrefix = "network/"

// index returns the ring slot of the step that begins at at.
func (se series) index(at time.Time) int {
	return int((at.Unix() / int64(se.step/time.Second)) % int64(se.slots))
}

// slot returns the store key and the beginning of the step of se that t falls in.
func (se series) slot(t time.Time) (string, time.Time) {
	at := t.Truncate(se.step)
	return NetworkCounterPrefix + se.name + "/" + strconv.Itoa(se.index(at)), at
}

// keys returns the store keys of every step of se, in slot order.
func (se series) keys() []string {
	out := make([]string, se.slots)
	for i := range out {
		out[i] = NetworkCounterPrefix + se.name + "/" + strconv.Itoa(i)
	}
	return out
}

// NetworkBounds are the network view's bounds. They are the registry's, kept with its other
// bounds and their reasons (package registry/limits), and handed in by it.
type NetworkBounds struct {
	MaxAge        time.Duration // how old the answer may grow before a request rebuilds it
	Groups        int           // the regions and capabilities a breakdown names
	HistorySpan   time.Duration // the span of the longest series
	HistorySettle time.Duration // how far before changed_since a shorter answer's series begin
	Variants      int           // the shorter answers kept with one answer
}

// Network keeps the history of the network in memory, read from the store after each
// sample, and the answer of GET /v1/network/stats built from it and the node table.
type Network struct {
	bounds  NetworkBounds
	store   store.Store
	clock   func() time.Time // the registry's clock, untruncated
	touches func() uint64    // the heartbeats the registry accepted so far
	online  time.Duration    // how recently a node was seen to count as online
	windows []int            // the windows, in seconds, the online counts are given for

	mu      sync.Mutex // the history: one sample's write or one load at a time
	steps   [][]store.Counter
	loaded  atomic.Bool
	version atomic.Uint64 // loads so far, so that an answer built before one is rebuilt
	sampled uint64        // touches counted into the history so far
	build   sync.Mutex    // one answer built, or one sample taken, at a time; taken before mu
	answer  atomic.Pointer[NetworkAnswer]
}

// NewNetwork returns the network view of the node table in st. clock is the registry's
// clock, touches counts the heartbeats it accepted, and online is how recently a node must
// have been seen to count as online.
func NewNetwork(b NetworkBounds, st store.Store, clock func() time.Time, touches func() uint64, online time.Duration) *Network {
	return &Network{bounds: b, store: st, clock: clock, touches: touches, online: online,
		// The page lets its reader pick one of these windows.
		windows: []int{60, 300, int(online / time.Second), 3600, 86400}}
}

// now is the registry's clock truncated to whole seconds, as every answer states it.
func (n *Network) now() time.Time { return n.clock().UTC().Truncate(time.Second) }

// NetworkAnswer is GET /v1/network/stats as built at one moment: the whole answer, and the
// parts the shorter answers to changed_since are put together from.
type NetworkAnswer struct {
	at      time.Time
	life    time.Duration // how long it is served before a request rebuilds it
	version uint64
	counts  []byte // the answer up to its history: an object without its closing brace
	history []encodedSeries
	whole   *Stats
	bounds  *NetworkBounds
	mu      sync.Mutex
	short   map[int64]*Stats // by the minute their series begin in
}

// Stats is one answer's bytes, their tag and, once asked for, their gzip form.
type Stats struct {
	body   []byte
	tag    string
	gzOnce sync.Once
	gz     []byte
}

func newStats(body []byte) *Stats {
	return &Stats{body: body, tag: ETag(func(f func([]byte)) { f(body) })}
}

// Body is the answer.
func (b *Stats) Body() []byte { return b.body }

// Tag is its strong entity tag.
func (b *Stats) Tag() string { return b.tag }

// Gzip is its gzip form, compressed once.
func (b *Stats) Gzip() []byte {
	b.gzOnce.Do(func() { b.gz = Compress(func(f func([]byte)) { f(b.body) }) })
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

// Sample records the network's state in the history: the nodes online and registered this
// hour, and the heartbeats this registry accepted since its last sample. The registry calls
// it every minute, on every registry of a shared store. The answer is built again from the
// same count, so that a sample costs the page no pass of its own.
func (n *Network) Sample(ctx context.Context) error {
	n.build.Lock()
	defer n.build.Unlock()
	now := n.now()
	c, pass, err := n.timedCount(ctx, now)
	if err != nil {
		return err
	}
	if err := n.recordSample(ctx, now, c); err != nil {
		return err
	}
	a, err := n.buildAnswer(c, pass, now)
	if err != nil {
		return err
	}
	n.answer.Store(a)
	return nil
}

// recordSample merges the sample c, taken at now, into the history, and reads the history
// again.
func (n *Network) recordSample(ctx context.Context, now time.Time, c nodeCounts) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	touches := n.touches()
	beats := int(touches - n.sampled)
	values := []int{c.online, c.online, beats, c.registeredThisHour}
	err := n.store.Update(ctx, func(tx store.Tx) error {
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
	return n.loadLocked(ctx)
}

// loadLocked reads the history from the store; n.mu is held.
func (n *Network) loadLocked(ctx context.Context) error {
	var keys []string
	for _, se := range networkSeries {
		keys = append(keys, se.keys()...)
	}
	var got []store.Counter
	err := n.store.View(ctx, func(tx store.Tx) error {
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
	windows                           []int // nodes seen within each of Network.windows
	regions, capabilities, reach      map[string]*api.Group
}

// countNodes counts the node table at now.
func (n *Network) countNodes(ctx context.Context, now time.Time) (nodeCounts, error) {
	c := nodeCounts{windows: make([]int, len(n.windows)),
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
	count := func(node *store.Node) error {
		c.nodes++
		age := now.Sub(node.LastSeen)
		online := age <= n.online
		if online {
			c.online++
		}
		for i, w := range n.windows {
			if age <= time.Duration(w)*time.Second {
				c.windows[i]++
			}
		}
		if !node.FirstSeen.Before(hour) {
			c.registeredThisHour++
		}
		add(c.regions, node.Region, online)
		add(c.reach, api.Reachability(node.Endpoint), online)
		for _, cp := range node.Capabilities {
			add(c.capabilities, cp, online)
		}
		return nil
	}
	return c, n.store.ScanNodes(ctx, count)
}

// Answer returns the current answer of GET /v1/network/stats. It is rebuilt — one
// pass over the node table — when it has lived its life (answerLife) or a sample came
// since; a request meanwhile reads it as built. While one is being rebuilt, others get the one
// before.
func (n *Network) Answer(ctx context.Context) (*NetworkAnswer, error) {
	now := n.now()
	fresh := func(a *NetworkAnswer) bool {
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
		err := n.loadLocked(ctx)
		n.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	c, pass, err := n.timedCount(ctx, now)
	if err != nil {
		return nil, err
	}
	a, err = n.buildAnswer(c, pass, now)
	if err != nil {
		return nil, err
	}
	n.answer.Store(a)
	return a, nil
}

// timedCount counts the node table at now, and says how long the pass took by the
// registry's clock untruncated (time.Now with its monotonic reading, unless the embedder
// gives another).
func (n *Network) timedCount(ctx context.Context, now time.Time) (nodeCounts, time.Duration, error) {
	start := n.clock()
	c, err := n.countNodes(ctx, now)
	return c, n.clock().Sub(start), err
}

// buildAnswer renders the count c, taken at now in a pass that took pass, and the history
// as it stands. n.build is held, and n.mu is not.
func (n *Network) buildAnswer(c nodeCounts, pass time.Duration, now time.Time) (*NetworkAnswer, error) {
	life := answerLife(n.bounds.MaxAge, pass)
	v := api.NetworkCounts{
		At:           canonical.FormatTime(now),
		Nodes:        c.nodes,
		OnlineWindow: int(n.online / time.Second),
		Regions:      breakdown(c.regions, n.bounds.Groups),
		Capabilities: breakdown(c.capabilities, n.bounds.Groups),
		Reachability: breakdown(c.reach, n.bounds.Groups),
	}
	for i, w := range n.windows {
		v.Online = append(v.Online, api.OnlineCount{Window: w, Nodes: c.windows[i]})
	}
	a := &NetworkAnswer{at: now, life: life, bounds: &n.bounds, history: make([]encodedSeries, len(networkSeries))}
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
	a.whole = newStats(a.body(time.Time{}))
	return a, nil
}

// passShare caps the time the passes that rebuild the answer take, as a share of the time
// between them: an answer whose pass took longer than maxAge / passShare lives passShare
// times its pass instead, up to the minute between samples (answerLife). Anyone may ask for
// the page, and the table grows with registrations, so without it a stranger asking every
// few seconds would hold a share of a core that grows with the network; with it the counts
// of a large table are older instead. It refuses no one: it only ages the counts.
const passShare = 100

// answerLife is how long an answer whose pass over the node table took pass is served:
// maxAge, or passShare times the pass when that is longer, and a minute at the most. A
// minute is the pace of the samples, each of which rebuilds the answer anyway; the cap keeps
// a clock that jumped during a pass from holding an answer for long where no one samples.
func answerLife(maxAge, pass time.Duration) time.Duration {
	return min(max(maxAge, passShare*pass), time.Minute)
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
func (a *NetworkAnswer) body(t time.Time) []byte {
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

// Stats returns the answer to changed_since t, the whole answer when t is zero: the counts,
// and each series from the step that NetworkBounds.HistorySettle before t falls in, so that
// it holds every step that may have changed since an answer built at t. It is built once per
// answer and first minute, for at most NetworkBounds.Variants of them.
func (a *NetworkAnswer) Stats(t time.Time) *Stats {
	if t.IsZero() {
		return a.whole
	}
	from := t.Add(-a.bounds.HistorySettle)
	if from.After(a.at) {
		from = a.at
	}
	from = from.Truncate(time.Minute)
	if from.Before(a.at.Add(-a.bounds.HistorySpan)) {
		return a.whole
	}
	key := from.Unix()
	a.mu.Lock()
	b := a.short[key]
	a.mu.Unlock()
	if b != nil {
		return b
	}
	b = newStats(a.body(from))
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept := a.short[key]; kept != nil {
		return kept
	}
	if len(a.short) < a.bounds.Variants {
		if a.short == nil {
			a.short = map[int64]*Stats{}
		}
		a.short[key] = b
	}
	return b
}

// breakdown orders groups by size and names the named largest.
func breakdown(m map[string]*api.Group, named int) api.Breakdown {
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
	if len(groups) > named {
		out.Groups = groups[:named]
		for _, g := range groups[named:] {
			out.Others.Groups++
			out.Others.Nodes += g.Nodes
			out.Others.Online += g.Online
		}
	}
	return out
}
