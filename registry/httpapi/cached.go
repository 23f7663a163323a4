package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svrp/svrp/didkey"
	"github.com/svrp/svrp/registry/answers"
	"github.com/svrp/svrp/registry/api"
)

// The answers any stranger may ask for as often as it likes: the node listings (GET /nodes,
// GET /peers, GET /api/v1/peers) and the network view (GET /v1/network/stats), served from
// the service's cached answers.

// listing answers one of the three node listings from the current snapshot of the node
// table (package registry/answers): the filter and the page pick records out of it, and they
// are encoded as they are written, so a listing allocates nothing in proportion to the table.
// Its entity tag is computed once per snapshot and query, and so is the gzip form of a small
// answer; a larger one is compressed as it is written.
func (h *handler) listing(w http.ResponseWriter, r *http.Request, k answers.Kind) {
	q := r.URL.Query()
	f, err := api.ParseNodeFilter(q)
	var p api.Page
	var after *answers.Cursor
	if err == nil {
		p, after, err = h.s.ListingPage(q, len(didkey.PublicKey{}))
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	snap, release, err := h.s.NodeListing(r.Context())
	defer release()
	if err != nil {
		h.fail(w, err)
		return
	}
	sel := snap.Select(k, f, p, after)
	if next := sel.Next(); next != "" {
		w.Header().Set("Link", nextLink(r, next))
	}
	gz := acceptsGzip(r)
	if conditional(w, r, sel.Tag(), etagHeader(sel.Tag(), gz)) {
		return
	}
	if !h.s.ListingTurn(r.Context()) {
		return // the client went away while it waited
	}
	if gz {
		if held := sel.Gzip(); held != nil {
			writeGzip(w, k.ContentType, held)
			return
		}
		// A large answer is compressed as it is written: its length is not known before.
		w.Header()["Content-Type"] = k.ContentType
		w.Header()["Content-Encoding"] = contentEncodingGzip
		sel.WriteGzip(w)
		return
	}
	w.Header()["Content-Type"] = k.ContentType
	w.Header()["Content-Length"] = []string{strconv.Itoa(sel.Size())}
	sel.Write(w)
}

func (h *handler) nodes(w http.ResponseWriter, r *http.Request, _ call) {
	h.listing(w, r, answers.NodesListing)
}

func (h *handler) apiPeers(w http.ResponseWriter, r *http.Request, _ call) {
	h.listing(w, r, answers.APIPeersListing)
}

func (h *handler) peers(w http.ResponseWriter, r *http.Request, _ call) {
	h.listing(w, r, answers.PeersListing)
}

// networkStats serves GET /v1/network/stats, whole or, for changed_since, with the series
// cut to what may have changed since.
func (h *handler) networkStats(w http.ResponseWriter, r *http.Request, _ call) {
	since, err := changedSince(r.URL.RawQuery)
	if err != nil {
		h.fail(w, err)
		return
	}
	a, err := h.s.NetworkStats(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	b := a.Stats(since)
	gz := acceptsGzip(r)
	if conditional(w, r, b.Tag(), etagHeader(b.Tag(), gz)) {
		return
	}
	if gz {
		writeGzip(w, contentTypeJSON, b.Gzip())
		return
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.Header()["Content-Length"] = []string{strconv.Itoa(len(b.Body()))}
	w.Write(b.Body())
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
