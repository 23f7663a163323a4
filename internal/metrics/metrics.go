// Package metrics is svrpd's Prometheus instrumentation: the request, error-code and
// rate-limit counters and the latency histograms the registry's handler feeds through its
// observer, the store's commit and heartbeat-flush timings, and gauges read from the
// registry when Prometheus scrapes. It registers everything on a registry it is given, never
// on the process-wide default one, so two daemons in one process (as in tests) do not share
// counters. docs/metrics.md lists every metric.
package metrics

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svrp/svrp/registry"
	"github.com/svrp/svrp/registry/budget"
	"github.com/svrp/svrp/registry/httpapi"
	"github.com/svrp/svrp/store"
)

const namespace = "svrpd"

// censusTimeout bounds one scrape's reading of the registry's state.
const censusTimeout = 10 * time.Second

// Metrics holds svrpd's collectors. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	codes      *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	commits    prometheus.Histogram
	groupSize  prometheus.Histogram
	commitErrs prometheus.Counter
	flushes    prometheus.Histogram
	flushErrs  prometheus.Counter

	// lastCommitOK and lastFlushOK record whether the last commit and the last heartbeat
	// flush succeeded; with the store's own disk state they make svrpd_store_healthy.
	lastCommitOK, lastFlushOK atomic.Bool
	svc                       atomic.Pointer[registry.Service]
	// statements reads the statements the store has sent; nil on a store that sends none.
	statements atomic.Pointer[func() uint64]
}

// New registers svrpd's collectors on reg. The gauges that describe the registry's state
// (nodes, sessions, challenges, rate-limit refusals) are read from svc at each scrape; svc
// may be nil until SetService is called.
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route (the endpoint's path template), method (other for a method HTTP does not define) and status code.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "http_request_duration_seconds",
			Help:    "Time from a request's arrival to its answer being written, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		codes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "protocol_errors_total",
			Help: "Error answers, by protocol error code (BAD_SIGNATURE, RATE_LIMITED, ...).",
		}, []string{"code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rate_limit_refusals_total",
			Help: "Requests refused with RATE_LIMITED, by the limit that refused them.",
		}, []string{"limit"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "store_commit_duration_seconds",
			Help:    "Time to run, commit and sync one group of store writes (Badger only).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "store_commit_group_size",
			Help:    "Store writes that shared one commit and one sync (group commit; Badger only).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}),
		commitErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_commit_errors_total",
			Help: "Store commits that failed.",
		}),
		flushes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "heartbeat_flush_duration_seconds",
			Help:    "Time to make the heartbeat times kept in memory durable (once a second).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 2.5},
		}),
		flushErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "heartbeat_flush_errors_total",
			Help: "Heartbeat flushes that failed.",
		}),
	}
	m.lastCommitOK.Store(true)
	m.lastFlushOK.Store(true)
	// Every limit's series exists from the start, at 0, so a rate() over it needs no first
	// refusal.
	for _, l := range budget.Names() {
		m.refusals.WithLabelValues(l)
	}
	reg.MustRegister(m.requests, m.latency, m.codes, m.refusals, m.commits, m.groupSize, m.commitErrs, m.flushes, m.flushErrs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "store_healthy",
			Help: "1 while the store's disk state is ok and the last store commit and the last heartbeat flush succeeded, else 0.",
		}, func() float64 {
			ok := m.lastCommitOK.Load() && m.lastFlushOK.Load()
			if svc := m.svc.Load(); svc != nil {
				st := svc.StoreHealth().State
				ok = ok && (st == "" || st == store.HealthOK)
			}
			if ok {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "store_statements_total",
			Help: "Statements sent to PostgreSQL, transaction control included (0 on the other stores).",
		}, func() float64 {
			if f := m.statements.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// CountStatements makes store_statements_total read f, the statements the store has sent.
func (m *Metrics) CountStatements(f func() uint64) { m.statements.Store(&f) }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Observe counts one answered request; it is the registry handler's observer. Every label
// is one of a set fixed at start (labels.go), so no request can add a series.
func (m *Metrics) Observe(e httpapi.Exchange) {
	route := knownRoutes.of(e.Route)
	m.requests.WithLabelValues(route, knownMethods.of(e.Method), statusLabel(e.Status)).Inc()
	m.latency.WithLabelValues(route).Observe(e.Duration.Seconds())
	if e.Code != "" {
		m.codes.WithLabelValues(knownCodes.of(string(e.Code))).Inc()
	}
	if e.Limit != "" {
		m.refusals.WithLabelValues(knownLimits.of(e.Limit)).Inc()
	}
}

// Commit records one store commit; it is the store's commit observer.
func (m *Metrics) Commit(updates int, took time.Duration, err error) {
	m.commits.Observe(took.Seconds())
	m.groupSize.Observe(float64(updates))
	if err != nil {
		m.commitErrs.Inc()
	}
	m.lastCommitOK.Store(err == nil)
}

// Flush records one heartbeat flush.
func (m *Metrics) Flush(took time.Duration, err error) {
	m.flushes.Observe(took.Seconds())
	if err != nil {
		m.flushErrs.Inc()
	}
	m.lastFlushOK.Store(err == nil)
}

// WatchService registers the gauges read from svc at each scrape.
func (m *Metrics) WatchService(svc *registry.Service) {
	m.svc.Store(svc)
	m.reg.MustRegister(&census{svc: svc})
}

// census reads the registry's state when Prometheus scrapes.
type census struct{ svc *registry.Service }

var (
	descNodes  = prometheus.NewDesc(namespace+"_nodes", "Registered node records.", nil, nil)
	descOnline = prometheus.NewDesc(namespace+"_nodes_online",
		"Node records seen within the online window (600 s).", nil, nil)
	descSessions = prometheus.NewDesc(namespace+"_binding_sessions_open",
		"Binding sessions not in a terminal state, by state.", []string{"state"}, nil)
	descBearer = prometheus.NewDesc(namespace+"_bearer_sessions",
		"Operator bearer sessions that have not expired.", nil, nil)
	descChallenges = prometheus.NewDesc(namespace+"_login_challenges_used",
		"Consumed login challenges the registry remembers until they expire (the used-set).", nil, nil)
	descChallengeCap = prometheus.NewDesc(namespace+"_login_challenges_used_capacity",
		"The used-set's bound: at this fill, logins are refused until entries expire.", nil, nil)
	descStoreState = prometheus.NewDesc(namespace+"_store_state",
		"The store's disk state: 1 for the current one of ok, low_space, gone and read_only (every state but ok refuses writes with STORE_UNAVAILABLE).", []string{"state"}, nil)
	descCensusOK = prometheus.NewDesc(namespace+"_census_ok",
		"1 when this scrape could read the registry's state from the store, else 0 (the state gauges are then absent).", nil, nil)
)

func (c *census) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodes, descOnline, descSessions, descBearer, descChallenges, descChallengeCap, descStoreState, descCensusOK} {
		ch <- d
	}
}

func (c *census) Collect(ch chan<- prometheus.Metric) {
	state := c.svc.StoreHealth().State
	if state == "" {
		state = store.HealthOK // a store that watches no disk (memory)
	}
	for _, s := range []string{store.HealthOK, store.HealthLowSpace, store.HealthGone, store.HealthReadOnly} {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descStoreState, prometheus.GaugeValue, v, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), censusTimeout)
	defer cancel()
	s, err := c.svc.Census(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descCensusOK, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descCensusOK, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(s.Nodes))
	ch <- prometheus.MustNewConstMetric(descOnline, prometheus.GaugeValue, float64(s.Online))
	for state, n := range s.OpenSessions {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(descBearer, prometheus.GaugeValue, float64(s.BearerSessions))
	if s.ChallengeCapacity >= 0 {
		ch <- prometheus.MustNewConstMetric(descChallenges, prometheus.GaugeValue, float64(s.ChallengesUsed))
		ch <- prometheus.MustNewConstMetric(descChallengeCap, prometheus.GaugeValue, float64(s.ChallengeCapacity))
	}
}
