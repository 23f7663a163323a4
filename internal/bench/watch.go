package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/internal/pause"
	"github.com/svrp/svrp/registry/client"
)

// The watcher scenario: a registry of many nodes, some of them heartbeating all the time, and
// watchers polling GET /nodes, first each time for the whole listing, then conditionally: the
// last ETag in If-None-Match (304 when nothing changed), only the nodes changed since the
// previous poll (changed_since), gzipped. It reports, for each way, the bytes a poll
// receives and the daemon's CPU per poll beyond what the heartbeats alone cost it.

// watcher runs the watcher scenario with clients watchers over n nodes.
func (b *bench) watcher(ctx context.Context, t *target, clients, n int) (*result, error) {
	nodes, err := b.registerNodes(ctx, t, n)
	if err != nil {
		return nil, err
	}
	bctx, stopBeats := context.WithCancel(ctx)
	var beats beatCount
	beaten := make(chan struct{})
	go func() {
		defer close(beaten)
		b.beat(bctx, t, nodes, b.cfg.beatRate, &beats)
	}()
	defer func() {
		stopBeats()
		<-beaten
	}()
	res := &result{Figures: map[string]float64{}}
	// What a heartbeat alone costs the daemon, taken from each poll's CPU below for the
	// heartbeats sent while the polls ran. Per heartbeat, not per second: on a busy machine
	// the sender falls behind and skips beats, more while the watchers poll than alone.
	var beatCPU float64 // µs of CPU per heartbeat
	if t.d != nil {
		alone := min(b.cfg.duration, 5*time.Second)
		sent := beats.sent.Load()
		share, err := t.d.cpuOver(ctx, alone)
		if err != nil {
			return nil, err
		}
		if n := beats.sent.Load() - sent; n > 0 {
			beatCPU = share * alone.Seconds() * 1e6 / float64(n)
		}
		res.Figures["heartbeats_alone_cpu_percent"] = round(100*share, 2)
		res.Figures["heartbeat_cpu_us"] = round(beatCPU, 1)
	}
	whole := t.poller(clients, b.cfg.pollEvery, func(w int) request {
		return request{method: http.MethodGet, path: "/nodes"}
	}, nil)
	etags, since := make([]string, clients), make([]string, clients)
	condition := func(w int) request {
		h := http.Header{"Accept-Encoding": {"gzip"}}
		if etags[w] != "" {
			h.Set("If-None-Match", etags[w])
		}
		q := url.Values{}
		if since[w] != "" {
			q.Set("changed_since", since[w])
		}
		if b.cfg.pageLimit > 0 {
			q.Set("limit", strconv.Itoa(b.cfg.pageLimit))
		}
		path := "/nodes"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		return request{method: http.MethodGet, path: path, header: h}
	}
	answered := func(w int, sent time.Time, res *http.Response) {
		if res.StatusCode == http.StatusOK {
			etags[w] = res.Header.Get("ETag")
		}
		since[w] = canonical.FormatTime(sent)
	}
	conditional := t.poller(clients, b.cfg.pollEvery, condition, answered)
	// Each watcher has been watching for a while: its first, whole listing is not timed.
	if err := parallel(ctx, clients, clients, func(w int) error {
		if o, _ := conditional(ctx, w); o.failed != "" {
			return fmt.Errorf("a watcher's first poll: %s", o.failed)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for _, mode := range []struct {
		name string
		poll op
	}{{"whole listing", whole}, {"conditional", conditional}} {
		sent := beats.sent.Load()
		p, err := b.window(ctx, t, mode.name, clients, 0, mode.poll)
		if err != nil {
			return nil, err
		}
		if p.CPUUsPerOp != nil {
			polls := float64(p.Ops + p.failures())
			during := float64(beats.sent.Load() - sent)
			net := round(max(*p.CPUUsPerOp-beatCPU*during/polls, 0), 1)
			p.CPUUsPerOp = &net
		}
		res.Phases = append(res.Phases, p)
	}
	w, c := res.Phases[0], res.Phases[1]
	res.setRatio("bytes_whole_over_conditional", w.BytesPerOp, c.BytesPerOp)
	if w.CPUUsPerOp != nil && c.CPUUsPerOp != nil {
		res.setRatio("cpu_whole_over_conditional", *w.CPUUsPerOp, *c.CPUUsPerOp)
	}
	res.Figures["heartbeats_sent"] = float64(beats.sent.Load())
	res.Figures["heartbeats_failed"] = float64(beats.failed.Load())
	return res, nil
}

// poller is an op for clients watchers that each poll at most once per every (back to back
// when a poll takes longer): next is watcher w's request, and answered, if given, sees each
// answer, 200 or 304, with the time the poll was sent. A poll's latency leaves out the wait.
func (t *target) poller(clients int, every time.Duration, next func(w int) request, answered func(w int, sent time.Time, res *http.Response)) op {
	due := make([]time.Time, clients)
	return func(ctx context.Context, w int) (outcome, bool) {
		if err := pause.For(ctx, time.Until(due[w])); err != nil {
			return outcome{failed: "cut off"}, true
		}
		sent := time.Now()
		due[w] = sent.Add(every)
		req := next(w)
		res, o := t.exchange(inFlight(ctx), req, http.StatusOK, http.StatusNotModified)
		first := res
		// A paged answer names its next page in a Link header: a poll reads every page.
		for o.failed == "" && res.StatusCode == http.StatusOK {
			link := nextLink(res.Header)
			if link == "" {
				break
			}
			var more outcome
			h := req.header.Clone()
			h.Del("If-None-Match")
			res, more = t.exchange(inFlight(ctx), request{method: http.MethodGet, path: t.resolve(link), header: h})
			o.bytes, o.failed = o.bytes+more.bytes, more.failed
		}
		o.took = max(time.Since(sent), 1)
		res = first
		if o.failed == "" && answered != nil {
			answered(w, sent, res)
		}
		return o, true
	}
}

// nextLink is the target of a Link header's rel="next", or "".
func nextLink(h http.Header) string {
	for _, v := range h.Values("Link") {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if ok && strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
				return strings.Trim(strings.TrimSpace(target), "<>")
			}
		}
	}
	return ""
}

// resolve is a link from an answer as a path below the target's base URL, or the absolute
// URL when it leaves it.
func (t *target) resolve(link string) string {
	base, err := url.Parse(t.base + "/")
	ref, err2 := url.Parse(link)
	if err != nil || err2 != nil {
		return link
	}
	abs := base.ResolveReference(ref).String()
	if rest, ok := strings.CutPrefix(abs, t.base); ok {
		return rest
	}
	return abs
}

// beatCount counts the background heartbeats.
type beatCount struct{ sent, failed atomic.Int64 }

// beat sends perSecond heartbeats a second, signed as they go, for nodes in turn, until ctx
// ends. It sends at most half the nodes a second: a node's heartbeats are then two seconds
// apart, and one signed in an earlier second never arrives after a later one, which the
// registry would refuse as stale.
func (b *bench) beat(ctx context.Context, t *target, nodes []*client.Node, perSecond int, count *beatCount) {
	perSecond = min(perSecond, len(nodes)/2)
	if perSecond <= 0 {
		return
	}
	const tick = 10 * time.Millisecond
	due := make(chan *client.Node, perSecond)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for nd := range due {
				req, err := nd.SignHeartbeat(time.Now().Unix())
				if err == nil {
					r, _ := post("/api/v1/heartbeat", req, nil)
					_, o := t.exchange(ctx, r)
					if o.failed != "" && ctx.Err() == nil {
						count.failed.Add(1)
					}
				}
				count.sent.Add(1)
			}
		}()
	}
	defer wg.Wait()
	defer close(due)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	start, sent := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			for owed := int(now.Sub(start).Seconds() * float64(perSecond)); sent < owed; sent++ {
				select {
				case due <- nodes[sent%len(nodes)]:
				default: // the daemon is behind: the beat is skipped, not queued
				}
			}
		}
	}
}

// stats compares GET /v1/network/stats with GET /health over n nodes: what a request costs
// the daemon and what it receives. The whole answer is asked for plainly and then accepting
// gzip, as a browser does; then as the console's Network view polls it: each client first
// asks for the whole answer, then, again and again, for what changed since the at of the
// last answer it read (changed_since), accepting gzip. The four are measured in
// statsRounds interleaved rounds (see interleaved); each ratio is that of the rounds'
// sums, and its _low and _high the lowest and highest of the rounds' own ratios, which show
// how far one window's figure can be trusted.
func (b *bench) stats(ctx context.Context, t *target, clients, n int) (*result, error) {
	if _, err := b.registerNodes(ctx, t, n); err != nil {
		return nil, err
	}
	gzip := http.Header{"Accept-Encoding": {"gzip"}}
	names := []string{"GET /health", "GET /v1/network/stats", "GET /v1/network/stats, gzip",
		"GET /v1/network/stats?changed_since=, gzip (the console's polls)"}
	rounds, err := b.interleaved(ctx, t, clients, statsRounds, []op{
		t.repeated(request{method: http.MethodGet, path: "/health"}),
		t.repeated(request{method: http.MethodGet, path: "/v1/network/stats"}),
		t.repeated(request{method: http.MethodGet, path: "/v1/network/stats", header: gzip}),
		t.statsPolls(clients),
	})
	if err != nil {
		return nil, err
	}
	res := &result{Figures: map[string]float64{}}
	sums := make([]sample, len(rounds))
	for i, rs := range rounds {
		for _, s := range rs {
			sums[i].add(s)
		}
		res.Phases = append(res.Phases, b.summary(names[i], 0, sums[i]))
	}
	for i, suffix := range []string{"", "_gzip", "_polls"} {
		name := "cpu_stats" + suffix + "_over_health"
		if cpu, ok := sums[1+i].cpuPerOp(); ok {
			health, _ := sums[0].cpuPerOp()
			res.setRatio(name, cpu, health)
			var each []float64
			for r := range rounds[0] {
				cpu, _ := rounds[1+i][r].cpuPerOp()
				health, _ := rounds[0][r].cpuPerOp()
				if health > 0 {
					each = append(each, cpu/health)
				}
			}
			if len(each) > 0 {
				res.Figures[name+"_low"] = round(slices.Min(each), 2)
				res.Figures[name+"_high"] = round(slices.Max(each), 2)
			}
		}
		res.setRatio("bytes_stats"+suffix+"_over_health", res.Phases[1+i].BytesPerOp, res.Phases[0].BytesPerOp)
	}
	return res, nil
}

// statsRounds is how many interleaved rounds the stats scenario splits its windows into:
// enough that drift falls on every request alike, few enough that each window is long
// against the 10 ms the daemon's CPU is read to.
const statsRounds = 5

// statsPolls is an op for clients that each poll GET /v1/network/stats as the console does:
// the whole answer first, then changed_since the at of the last answer read, accepting gzip.
// Each keeps its buffer and gzip reader, so that the generator, on the daemon's machine,
// takes little more of it than for /health.
func (t *target) statsPolls(clients int) op {
	polls := make([]statsPoller, clients)
	return func(ctx context.Context, w int) (outcome, bool) {
		p := &polls[w]
		path := "/v1/network/stats"
		if p.last != "" {
			path += "?changed_since=" + url.QueryEscape(p.last)
		}
		req, err := http.NewRequestWithContext(inFlight(ctx), http.MethodGet, t.base+path, nil)
		if err != nil {
			return outcome{failed: err.Error()}, true
		}
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := t.http.Do(req)
		if err != nil {
			return outcome{failed: transportKind(err)}, true
		}
		defer res.Body.Close()
		p.body.Reset()
		_, err = p.body.ReadFrom(res.Body)
		o := outcome{bytes: headerBytes(res) + int64(p.body.Len())}
		switch {
		case err != nil:
			o.failed = transportKind(err)
		case res.StatusCode != http.StatusOK:
			o.failed = strconv.Itoa(res.StatusCode)
		case res.Header.Get("ETag") != p.tag:
			// A new answer: its at is read. The same tag is the same answer, and the same at.
			if p.last, err = p.answerAt(res.Header); err != nil {
				o.failed = "the answer: " + err.Error()
			}
			p.tag = res.Header.Get("ETag")
		}
		return o, true
	}
}

// statsPoller is one client of statsPolls: the at and tag of the last answer it read, and
// what it reads the next with.
type statsPoller struct {
	last string
	tag  string
	body bytes.Buffer
	zr   *gzip.Reader
}

// answerAt reads the at of the stats answer in p.body, gzip or not: its first member, so as
// to decode no more than that.
func (p *statsPoller) answerAt(h http.Header) (string, error) {
	var r io.Reader = &p.body
	if h.Get("Content-Encoding") == "gzip" {
		if p.zr == nil {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return "", err
			}
			p.zr = zr
		} else if err := p.zr.Reset(r); err != nil {
			return "", err
		}
		r = p.zr
	}
	dec := json.NewDecoder(r)
	var first []json.Token
	for range 3 {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		first = append(first, t)
	}
	if at, ok := first[2].(string); ok && first[1] == "at" {
		return at, nil
	}
	return "", errors.New("it does not begin with at")
}
