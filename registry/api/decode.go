package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/svrp/svrp/proto"
)

// object is a JSON object whose fields are read one by one, so that the first missing field
// or wrong JSON type is reported by name (docs/protocol.md §5.0) and nothing is guessed.
type object struct {
	name   string // the path of this object in the body, "" at the top
	fields map[string]json.RawMessage
}

// decodeObject parses a request body that must be one JSON object.
func decodeObject(body []byte) (object, error) {
	var fields map[string]json.RawMessage
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return object{}, badRequest("request body must be a JSON object")
	}
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return object{}, badRequest("request body is not valid JSON")
	}
	return object{fields: fields}, nil
}

func (o object) path(field string) string {
	if o.name == "" {
		return field
	}
	return o.name + "." + field
}

// raw returns the field's JSON and whether it is present and not null.
func (o object) raw(field string) (json.RawMessage, bool) {
	v, ok := o.fields[field]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (o object) missing(field string) error {
	return badRequest(fmt.Sprintf("field %s is required", o.path(field)))
}

func (o object) wrongType(field, want string) error {
	return badRequest(fmt.Sprintf("field %s must be %s", o.path(field), want))
}

// str reads a required string.
func (o object) str(field string) (string, error) {
	s, ok, err := o.optStr(field)
	if err == nil && !ok {
		err = o.missing(field)
	}
	return s, err
}

// optStr reads a string that may be absent or null.
func (o object) optStr(field string) (string, bool, error) {
	v, ok := o.raw(field)
	if !ok {
		return "", false, nil
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false, o.wrongType(field, "a string")
	}
	return s, true, nil
}

// optStrList reads an array of strings that may be absent or null (then it is empty).
func (o object) optStrList(field string) ([]string, error) {
	v, ok := o.raw(field)
	if !ok {
		return []string{}, nil
	}
	var items []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &items) != nil {
		return nil, o.wrongType(field, "an array of strings")
	}
	out := make([]string, len(items))
	for i, it := range items {
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &out[i]) != nil {
			return nil, o.wrongType(field, "an array of strings")
		}
	}
	return out, nil
}

// strList reads a required array of strings.
func (o object) strList(field string) ([]string, error) {
	if _, ok := o.raw(field); !ok {
		return nil, o.missing(field)
	}
	return o.optStrList(field)
}

// optNumber reads a number that may be absent or null (then nil). JSON numbers that overflow
// float64 are refused here.
func (o object) optNumber(field string) (*float64, error) {
	v, ok := o.raw(field)
	if !ok {
		return nil, nil
	}
	var f float64
	if !isJSONNumber(v) || json.Unmarshal(v, &f) != nil {
		return nil, o.wrongType(field, "a finite number or null")
	}
	return &f, nil
}

// integer reads a required integer.
func (o object) integer(field string) (int64, error) {
	v, ok := o.raw(field)
	if !ok {
		return 0, o.missing(field)
	}
	var n int64
	if !isJSONNumber(v) || json.Unmarshal(v, &n) != nil {
		return 0, o.wrongType(field, "an integer")
	}
	return n, nil
}

// boolean reads a required boolean.
func (o object) boolean(field string) (bool, error) {
	v, ok := o.raw(field)
	if !ok {
		return false, o.missing(field)
	}
	var b bool
	if (v[0] != 't' && v[0] != 'f') || json.Unmarshal(v, &b) != nil {
		return false, o.wrongType(field, "a boolean")
	}
	return b, nil
}

// obj reads a required nested object.
func (o object) obj(field string) (object, error) {
	v, ok := o.raw(field)
	if !ok {
		return object{}, o.missing(field)
	}
	var fields map[string]json.RawMessage
	if v[0] != '{' || json.Unmarshal(v, &fields) != nil {
		return object{}, o.wrongType(field, "an object")
	}
	return object{name: o.path(field), fields: fields}, nil
}

func isJSONNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// decodeWith decodes a request body that must be one JSON object: read takes its fields
// through a reader, and the first error any read (or read itself) records is the result.
func decodeWith[T any](body []byte, read func(r *reader) T) (T, error) {
	var zero T
	o, err := decodeObject(body)
	if err != nil {
		return zero, err
	}
	r := reader{o: o}
	v := read(&r)
	if r.err != nil {
		return zero, r.err
	}
	return v, nil
}

// reader collects the first error of a run of field reads, so a decoder reads as the list of
// fields of its request.
type reader struct {
	o   object
	err error
}

// read is one read of the field through get, unless an earlier read failed.
func read[T any](r *reader, field string, get func(object, string) (T, error)) T {
	if r.err != nil {
		var zero T
		return zero
	}
	v, err := get(r.o, field)
	r.err = err
	return v
}

// readOpt is read for a field that may be absent, saying whether it was present.
func readOpt[T any](r *reader, field string, get func(object, string) (T, bool, error)) (T, bool) {
	if r.err != nil {
		var zero T
		return zero, false
	}
	v, ok, err := get(r.o, field)
	r.err = err
	return v, ok
}

// nested decodes o, an object read from a field before, through decode, unless an earlier
// read failed.
func nested[T any](r *reader, o object, decode func(object) (T, error)) T {
	if r.err != nil {
		var zero T
		return zero
	}
	v, err := decode(o)
	r.err = err
	return v
}

// readSigned reads o as a signed object: the fields of the message m points to, then its
// signature into sig.
func readSigned(o object, m any, sig *string) error {
	r := reader{o: o}
	r.message(m)
	*sig = r.str("signature")
	return r.err
}

func (r *reader) str(field string) string { return read(r, field, object.str) }

func (r *reader) optStr(field string) string {
	s, _ := readOpt(r, field, object.optStr)
	return s
}

func (r *reader) optStrPtr(field string) *string {
	if s, ok := readOpt(r, field, object.optStr); ok {
		return &s
	}
	return nil
}

func (r *reader) strList(field string) []string { return read(r, field, object.strList) }

func (r *reader) optStrList(field string) []string { return read(r, field, object.optStrList) }

func (r *reader) optNumber(field string) *float64 { return read(r, field, object.optNumber) }

func (r *reader) integer(field string) int64 { return read(r, field, object.integer) }

// optInteger reads an integer that may be absent or null (then nil).
func (r *reader) optInteger(field string) *int64 {
	if _, ok := r.o.raw(field); !ok || r.err != nil {
		return nil
	}
	n := read(r, field, object.integer)
	return &n
}

func (r *reader) boolean(field string) bool { return read(r, field, object.boolean) }

func (r *reader) obj(field string) object { return read(r, field, object.obj) }

// message reads the fields of the signed message m points to (a struct of package canonical)
// in the order the struct declares them, under their JSON names, each by the rule of its Go
// type: a string is required, unless its tag says omitempty; a list of strings may be absent
// or null and is then empty, or nil when its tag says omitempty; a limit (*float64) may be
// absent or null; a boolean and an int64 are required. So every message is read by the same
// rules, in the same order as its bytes are signed.
func (r *reader) message(m any) {
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		optional := opts == "omitempty"
		switch f := v.Field(i).Addr().Interface().(type) {
		case *string:
			if optional {
				*f = r.optStr(name)
			} else {
				*f = r.str(name)
			}
		case *[]string:
			if !optional {
				*f = r.optStrList(name)
			} else if _, present := r.o.raw(name); present {
				*f = r.strList(name)
			}
		case **float64:
			*f = r.optNumber(name)
		case *bool:
			*f = r.boolean(name)
		case *int64:
			*f = r.integer(name)
		}
	}
}

func badRequest(msg string) error { return proto.New(proto.BadRequest, msg) }
