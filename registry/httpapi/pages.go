package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/svrp/svrp/registry/answers"
)

// The headers that make an answer cheap to ask for again (docs/protocol.md §5.1): a strong
// ETag, so a client that has it gets 304 and no body; gzip, when the client accepts it; and
// the Link to the next page. Package registry/answers makes the bytes, tags and gzip forms
// of the cached answers; this file sends them.

// nextLink is the Link header naming the next page of the request r: its query, with the
// cursor next.
func nextLink(r *http.Request, next string) string {
	q := r.URL.Query()
	q.Set("cursor", next)
	return "<" + r.URL.Path + "?" + q.Encode() + `>; rel="next"`
}

// gzipTag is the entity tag of the gzip form of the answer tagged tag: a different
// representation, so a different strong tag.
func gzipTag(tag string) string { return strings.TrimSuffix(tag, `"`) + `-gzip"` }

// notModified reports whether the If-None-Match header of r names tag, in either of its
// encodings (RFC 9110 §13.1.2: weak comparison).
func notModified(r *http.Request, tag string) bool {
	lines := r.Header.Values("If-None-Match")
	if len(lines) == 0 {
		return false
	}
	gzTag := gzipTag(tag)
	for _, line := range lines {
		for rest := line; rest != ""; {
			var t string
			t, rest, _ = strings.Cut(rest, ",")
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if t == "*" || t == tag || t == gzTag {
				return true
			}
		}
	}
	return false
}

// acceptsGzip reports whether r accepts a gzip answer: Accept-Encoding names gzip (or *)
// without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, line := range r.Header.Values("Accept-Encoding") {
		for rest := line; rest != ""; {
			var item string
			item, rest, _ = strings.Cut(rest, ",")
			name, params, _ := strings.Cut(item, ";")
			name = strings.TrimSpace(name)
			if !strings.EqualFold(name, "gzip") && !strings.EqualFold(name, "x-gzip") && name != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if v, err := strconv.ParseFloat(q, 64); err != nil || v <= 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// conditional sets the ETag and Vary headers of an answer tagged tag (etag is the ETag
// header's value for the form sent: see etagHeader), and answers 304 when r already holds
// it; it reports whether it did.
func conditional(w http.ResponseWriter, r *http.Request, tag string, etag []string) bool {
	h := w.Header()
	addVaryAcceptEncoding(h)
	h["Etag"] = etag
	if notModified(r, tag) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// etagHeader is the ETag header's value for the answer tagged tag, in its gzip form or not.
func etagHeader(tag string, gz bool) []string {
	if gz {
		return []string{gzipTag(tag)}
	}
	return []string{tag}
}

// addVaryAcceptEncoding adds Accept-Encoding to h's Vary, after the Vary: Origin of CORS, if
// any, without an allocation when it is the only one.
func addVaryAcceptEncoding(h http.Header) {
	if v := h["Vary"]; len(v) > 0 {
		h["Vary"] = append(v[:len(v):len(v)], "Accept-Encoding")
		return
	}
	h["Vary"] = varyAcceptEncoding
}

// writeGzip writes a gzip answer.
func writeGzip(w http.ResponseWriter, contentType []string, gz []byte) {
	h := w.Header()
	h["Content-Type"] = contentType
	h["Content-Encoding"] = contentEncodingGzip
	h["Content-Length"] = []string{strconv.Itoa(len(gz))}
	w.Write(gz)
}

// serveSmall answers with body, a JSON answer small enough to be built per request: tagged,
// 304 when r holds it, gzip when r accepts it.
func serveSmall(w http.ResponseWriter, r *http.Request, body []byte) {
	emit := func(f func([]byte)) { f(body) }
	gz := acceptsGzip(r)
	tag := answers.ETag(emit)
	if conditional(w, r, tag, etagHeader(tag, gz)) {
		return
	}
	if gz {
		writeGzip(w, contentTypeJSON, answers.Compress(emit))
		return
	}
	w.Header()["Content-Type"] = contentTypeJSON
	w.Write(body)
}
