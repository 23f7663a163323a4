// Package nodecodec is the compact binary form of a node record that the Badger and
// PostgreSQL stores keep, in place of JSON. It is not for the other records, which are few
// per node and kept as JSON.
package nodecodec

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/svrp/svrp/store"
)

// Node records are the one kind the Badger store holds by the million and reads all at
// once at start-up (WithNodeCache), so they have a compact binary form instead of JSON:
// decoding it is an order of magnitude faster, which keeps a restart over a million nodes
// within seconds.
//
// Layout, version 1:
//
//	byte     version (1)
//	[32]     key
//	byte     flags: 1 signature present, 2 signature verified, 4 capabilities not nil
//	time     first_seen, then last_seen
//	string   did, endpoint, region, and signature when present
//	uvarint  number of capabilities, then each as a string
//
// where a string is a uvarint length and that many bytes, and a time is the varint Unix
// seconds, the uvarint nanoseconds and the varint UTC offset in seconds — what the JSON form
// kept too: an offset of 0 reads back as UTC, any other as a fixed zone.
//
// Version 2 is version 1 followed by one varint, the registration_ts of a v2 registration
// (docs/protocol.md §10.1). A record without one is still written as version 1, so every record has
// exactly one encoding, records written before version 2 read back with a nil
// RegistrationTS, and a daemon that knows only version 1 still reads what a newer one wrote
// for v1 registrations.
//
// Flag 8 marks a record that carries the address block it was registered from
// (store.Node.Origin): one string after everything above. A record without one has
// the flag clear and no string, so records written before it existed read back unchanged.
const (
	nodeCodecVersion   = 2
	nodeCodecVersionV1 = 1
)

const (
	nodeFlagSigned   = 1
	nodeFlagVerified = 2
	nodeFlagCaps     = 4
	nodeFlagBlock    = 8
	nodeFlagsAll     = nodeFlagSigned | nodeFlagVerified | nodeFlagCaps | nodeFlagBlock
)

var errBadNodeRecord = errors.New("malformed node record")

// Append appends the binary form of n.
func Append(b []byte, n store.Node) []byte {
	version := byte(nodeCodecVersionV1)
	if n.RegistrationTS != nil {
		version = nodeCodecVersion
	}
	b = append(b, version)
	b = append(b, n.Key[:]...)
	var flags byte
	if n.Signature != nil {
		flags |= nodeFlagSigned
	}
	if n.SignatureVerified {
		flags |= nodeFlagVerified
	}
	if n.Capabilities != nil {
		flags |= nodeFlagCaps
	}
	if n.Origin != "" {
		flags |= nodeFlagBlock
	}
	b = append(b, flags)
	b = appendCodecTime(b, n.FirstSeen)
	b = appendCodecTime(b, n.LastSeen)
	b = appendCodecString(b, n.DID)
	b = appendCodecString(b, n.Endpoint)
	b = appendCodecString(b, n.Region)
	if n.Signature != nil {
		b = appendCodecString(b, *n.Signature)
	}
	b = binary.AppendUvarint(b, uint64(len(n.Capabilities)))
	for _, c := range n.Capabilities {
		b = appendCodecString(b, c)
	}
	if n.RegistrationTS != nil {
		b = binary.AppendVarint(b, *n.RegistrationTS)
	}
	if n.Origin != "" {
		b = appendCodecString(b, n.Origin)
	}
	return b
}

func appendCodecTime(b []byte, t time.Time) []byte {
	_, offset := t.Zone()
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	return binary.AppendVarint(b, int64(offset))
}

func appendCodecString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Decode parses the binary form; anything else, trailing bytes included, is an error.
func Decode(b []byte) (store.Node, error) {
	d := nodeDecoder{b: b}
	var n store.Node
	version := d.byte()
	if version != nodeCodecVersionV1 && version != nodeCodecVersion {
		return store.Node{}, errBadNodeRecord
	}
	copy(n.Key[:], d.take(len(n.Key)))
	flags := d.byte()
	n.FirstSeen = d.time()
	n.LastSeen = d.time()
	n.DID = d.string()
	n.Endpoint = d.string()
	n.Region = d.string()
	if flags&nodeFlagSigned != 0 {
		sig := d.string()
		n.Signature = &sig
	}
	n.SignatureVerified = flags&nodeFlagVerified != 0
	count := d.uvarint()
	if count > uint64(len(d.b)) { // each capability takes at least one byte
		return store.Node{}, errBadNodeRecord
	}
	if flags&nodeFlagCaps != 0 {
		n.Capabilities = make([]string, 0, count)
	} else if count != 0 {
		return store.Node{}, errBadNodeRecord
	}
	for range count {
		n.Capabilities = append(n.Capabilities, d.string())
	}
	if version == nodeCodecVersion {
		ts := d.varint()
		n.RegistrationTS = &ts
	}
	if flags&nodeFlagBlock != 0 {
		if n.Origin = d.string(); n.Origin == "" {
			return store.Node{}, errBadNodeRecord
		}
	}
	if d.bad || len(d.b) != 0 || flags&^nodeFlagsAll != 0 {
		return store.Node{}, errBadNodeRecord
	}
	return n, nil
}

// nodeDecoder reads a node record; the first short read sets bad, and later reads return
// zero values, so Decode reads as the layout and checks once at the end.
type nodeDecoder struct {
	b   []byte
	bad bool
}

func (d *nodeDecoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *nodeDecoder) byte() byte {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *nodeDecoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || !minimal(d.b[:n]) {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

// minimal reports whether a varint is in its shortest form, so that every record has exactly
// one encoding: a longer form ends in a zero byte after a continuation.
func minimal(v []byte) bool { return len(v) == 1 || v[len(v)-1] != 0 }

// varint reads a signed varint: the zig-zag form encoding/binary writes, over uvarint.
func (d *nodeDecoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *nodeDecoder) time() time.Time {
	sec, nsec, offset := d.varint(), d.uvarint(), d.varint()
	if d.bad || nsec >= 1e9 || offset < -24*3600 || offset > 24*3600 {
		d.bad = true
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec))
	if offset == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", int(offset)))
}

func (d *nodeDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return ""
	}
	return string(d.take(int(n)))
}
