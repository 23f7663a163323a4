package api

// decodePlainHeartbeat reads the heartbeat body every node sends: one JSON object holding
// did, ts and signature, and public_key or not, each once and in any order, with printable
// ASCII strings that have no escapes, an integer ts of at most 18 digits, and only JSON's
// whitespace. It reports false for any other body, even a valid one, which the general
// decoder then reads: so it answers only where it is sure of the general decoder's answer,
// and never refuses. It exists because a registry decodes a heartbeat per node per interval,
// and the general decoder's map of raw fields costs a good part of a heartbeat's CPU.
func decodePlainHeartbeat(body []byte) (HeartbeatRequest, bool) {
	p := plainParser{s: string(body)}
	var req HeartbeatRequest
	var seen [4]bool // did, ts, signature, public_key
	if !p.next('{') {
		return req, false
	}
	for {
		key, ok := p.str()
		if !ok || !p.next(':') {
			return req, false
		}
		var field int
		switch key {
		case "did":
			field = 0
			req.DID, ok = p.str()
		case "ts":
			field = 1
			req.TS, ok = p.integer()
		case "signature":
			field = 2
			req.Signature, ok = p.str()
		case "public_key":
			field = 3
			if !p.null() {
				var k string
				k, ok = p.str()
				req.PublicKey = &k
			}
		default:
			return req, false
		}
		if !ok || seen[field] {
			return req, false
		}
		seen[field] = true
		if p.next('}') {
			break
		}
		if !p.next(',') {
			return req, false
		}
	}
	p.space()
	return req, p.i == len(p.s) && seen[0] && seen[1] && seen[2]
}

// plainParser walks the body, a string so that the fields it returns share one copy of it.
type plainParser struct {
	s string
	i int
}

// space skips JSON's whitespace.
func (p *plainParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next consumes c after any whitespace, and reports whether it was there.
func (p *plainParser) next(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII other than the quote and the backslash.
func (p *plainParser) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
		p.i++
	}
	return "", false
}

// integer reads -?(0|[1-9][0-9]*) of at most 18 digits, which always fits an int64.
func (p *plainParser) integer() (int64, bool) {
	p.space()
	neg := p.i < len(p.s) && p.s[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		n = n*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.s[start] == '0') {
		return 0, false
	}
	// A fraction or an exponent makes it a number that is not an integer, or one written
	// another way: the general decoder judges it.
	if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// null consumes a JSON null, if that is what comes next.
func (p *plainParser) null() bool {
	p.space()
	if len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "null" {
		p.i += 4
		return true
	}
	return false
}
