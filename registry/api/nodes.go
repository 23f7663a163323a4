package api

import (
	"net/url"
	"strconv"
	"time"

	"github.com/svrp/svrp/canonical"
)

// RegisterRequest is the body of POST /api/v1/register.
type RegisterRequest struct {
	DID          string   `json:"did"`
	PublicKey    string   `json:"public_key"` // hex or base58
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	Region       string   `json:"region,omitempty"` // "" is null
	// Signature is the base58 signature over message 3 (message 10 when TS is set), or nil.
	// Grace mode records a v1 registration whatever its signature says, unless the daemon is
	// strict or the key already has a verified record; a v2 registration must verify.
	Signature *string `json:"signature"`
	// TS, when set, makes this a v2 registration (docs/protocol.md §10.1): the unix seconds it
	// was signed at, within 300 s of the registry's clock and greater than the key's last one.
	TS *int64 `json:"ts,omitempty"`
}

// RegisterResult is the answer to a registration.
type RegisterResult struct {
	OK         bool     `json:"ok"`
	Registered bool     `json:"registered"`
	Signed     bool     `json:"signed"`
	IDBound    bool     `json:"id_bound"`
	Data       NodeView `json:"data"`
	// LogIndex is the index of the registration's entry in the transparency log, when it
	// logged one (docs/protocol.md §12).
	LogIndex *int64 `json:"log_index,omitempty"`
}

// NodeView is a node record as GET /nodes serves it (docs/protocol.md §4.1).
type NodeView struct {
	DID               string   `json:"did"`
	PublicKey         string   `json:"public_key"`
	Endpoint          string   `json:"endpoint"`
	Capabilities      []string `json:"capabilities"`
	Region            *string  `json:"region"`
	Status            string   `json:"status"`
	LastSeen          string   `json:"last_seen"`
	FirstSeen         string   `json:"first_seen"`
	Signature         *string  `json:"signature"`
	SignaturePresent  bool     `json:"signature_present"`
	SignatureVerified bool     `json:"signature_verified"`
	Reachability      string   `json:"reachability"`
	// RegistrationTS is the ts of the v2 registration the record came from, or null
	// (docs/protocol.md §10.1): with it anyone can rebuild message 10 and re-verify the record.
	RegistrationTS *int64 `json:"registration_ts"`
}

func DecodeRegister(body []byte) (RegisterRequest, error) {
	return decodeWith(body, func(r *reader) RegisterRequest {
		req := RegisterRequest{
			DID:          r.str("did"),
			PublicKey:    r.str("public_key"),
			Endpoint:     r.str("endpoint"),
			Capabilities: r.optStrList("capabilities"),
			Region:       r.optStr("region"),
			Signature:    r.optStrPtr("signature"),
			TS:           r.optInteger("ts"),
		}
		if _, present := r.o.raw("region"); present && req.Region == "" && r.err == nil {
			r.err = badRequest("field region must be 1-256 bytes")
		}
		return req
	})
}

// HeartbeatRequest is the body of POST /api/v1/heartbeat.
type HeartbeatRequest struct {
	DID       string  `json:"did"`
	TS        int64   `json:"ts"`
	Signature string  `json:"signature"`
	PublicKey *string `json:"public_key,omitempty"` // optional; must bind to DID when sent, even empty
}

// HeartbeatResult is the answer to a heartbeat.
type HeartbeatResult struct {
	OK       bool   `json:"ok"`
	LastSeen string `json:"last_seen"`
}

func DecodeHeartbeat(body []byte) (HeartbeatRequest, error) {
	if req, ok := decodePlainHeartbeat(body); ok {
		return req, nil
	}
	return decodeHeartbeat(body)
}

// decodeHeartbeat is DecodeHeartbeat for any body, by the rules every request body is read by.
func decodeHeartbeat(body []byte) (HeartbeatRequest, error) {
	return decodeWith(body, func(r *reader) HeartbeatRequest {
		return HeartbeatRequest{
			DID:       r.str("did"),
			TS:        r.integer("ts"),
			Signature: r.str("signature"),
			PublicKey: r.optStrPtr("public_key"),
		}
	})
}

// NodeFilter selects node records (docs/protocol.md §5.1, the query of GET /nodes and /peers).
type NodeFilter struct {
	// OnlineWithin keeps nodes seen within this long; 0 keeps all, unless OnlineSet.
	OnlineWithin time.Duration
	// Capabilities must all be advertised.
	Capabilities []string
	// Region, when set, must equal the record's region.
	Region string
	// Callable keeps public, signature-verified records.
	Callable bool

	// OnlineSet applies OnlineWithin even when it is 0: the query named online_within, and
	// an explicit 0 is the window "now − last_seen ≤ 0" of docs/protocol.md §5.1 (the nodes seen in
	// the current second), not "no filter".
	OnlineSet bool
}

// ParseNodeFilter reads the query of GET /nodes and /peers.
func ParseNodeFilter(q url.Values) (NodeFilter, error) {
	f := NodeFilter{Capabilities: q["capability"], Region: q.Get("region")}
	if v := q.Get("online_within"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<32 {
			return NodeFilter{}, badRequest("online_within must be a whole number of seconds")
		}
		f.OnlineWithin = time.Duration(n) * time.Second
		f.OnlineSet = true
	}
	switch q.Get("callable") {
	case "", "0", "false":
	case "1", "true":
		f.Callable = true
	default:
		return NodeFilter{}, badRequest("callable must be 1 or 0")
	}
	return f, nil
}

// Query renders f as the query ParseNodeFilter reads. A window is rounded up to whole
// seconds: a sub-second window must not become 0, which the registry reads as "all".
func (f NodeFilter) Query() url.Values {
	q := url.Values{}
	if f.OnlineWithin > 0 || f.OnlineSet {
		secs := (f.OnlineWithin + time.Second - 1) / time.Second
		q.Set("online_within", strconv.FormatInt(int64(max(secs, 0)), 10))
	}
	for _, c := range f.Capabilities {
		q.Add("capability", c)
	}
	if f.Region != "" {
		q.Set("region", f.Region)
	}
	if f.Callable {
		q.Set("callable", "1")
	}
	return q
}

// Page selects a part of a node listing (docs/protocol.md §5.1): at most Limit records (0:
// no limit) after the place Cursor names ("" for the first page), changed at or after
// ChangedSince (zero: whenever). Cursor is opaque here: the registry gave it and reads it.
type Page struct {
	Limit        int
	Cursor       string
	ChangedSince time.Time
}

// Paged reports whether p asks for anything but the whole listing.
func (p Page) Paged() bool { return p.Limit > 0 || p.Cursor != "" || !p.ChangedSince.IsZero() }

// ParsePage reads limit, cursor and changed_since from the query of a listing; maxLimit is
// the largest limit the registry answers.
func ParsePage(q url.Values, maxLimit int) (Page, error) {
	var p Page
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > maxLimit || len(v) > 1 {
			return Page{}, badRequest("limit must be one whole number from 1 to " + strconv.Itoa(maxLimit))
		}
		p.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		if len(v) > 1 || v[0] == "" {
			return Page{}, badRequest("cursor must be given once, as the registry gave it")
		}
		p.Cursor = v[0]
	}
	var err error
	if p.ChangedSince, err = ParseChangedSince(q); err != nil {
		return Page{}, err
	}
	return p, nil
}

// ParseChangedSince reads changed_since from a query: zero when it is absent.
func ParseChangedSince(q url.Values) (time.Time, error) {
	v, ok := q["changed_since"]
	if !ok {
		return time.Time{}, nil
	}
	if len(v) > 1 {
		return time.Time{}, errChangedSince()
	}
	return ChangedSince(v[0])
}

// ChangedSince parses one changed_since value, as [ParseChangedSince] reads it from a query.
func ChangedSince(v string) (time.Time, error) {
	t, err := canonical.ParseTime(v)
	if err != nil {
		return time.Time{}, errChangedSince()
	}
	return t, nil
}

func errChangedSince() error {
	return badRequest("changed_since must be one timestamp of the form 2025-01-15T10:30:00Z")
}
