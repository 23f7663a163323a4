package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svrp/svrp/authn"
	"github.com/svrp/svrp/binding"
)

// TestClone guards the memory store's isolation against fields added later: it fills every
// field of each stored type, including through pointers and slices, clones, then changes
// every reachable value of the original in place. A field the clone functions forget to
// copy shows up as a difference. A map or interface field fails the test until the walk
// and the clone functions learn about it.
func TestClone(t *testing.T) {
	check := func(name string, typ reflect.Type, clone func(any) any) {
		t.Run(name, func(t *testing.T) {
			orig := reflect.New(typ).Elem()
			fill(t, orig, 1)
			want := reflect.New(typ).Elem()
			fill(t, want, 1)
			c := clone(orig.Interface())
			fill(t, orig, 2)
			if d := cmp.Diff(want.Interface(), c); d != "" {
				t.Errorf("clone shares memory with the original (-want +got):\n%s", d)
			}
		})
	}
	check("Node", reflect.TypeFor[Node](), func(v any) any { return cloneNode(v.(Node)) })
	check("Session", reflect.TypeFor[binding.BindingSession](), func(v any) any { return cloneSession(v.(binding.BindingSession)) })
	check("Binding", reflect.TypeFor[binding.Binding](), func(v any) any { return cloneBinding(v.(binding.Binding)) })
	check("OperatorSession", reflect.TypeFor[authn.BearerSession](), func(v any) any { return cloneBearerSession(v.(authn.BearerSession)) })
	check("Counter", reflect.TypeFor[Counter](), func(v any) any { return cloneCounter(v.(Counter)) })
}

// fill sets every value reachable from v to one derived from seed. Pointers and slices
// already set are followed and written through rather than replaced, so that a second fill
// changes whatever memory the first one allocated.
func fill(t *testing.T, v reflect.Value, seed int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(rune('a' + seed)))
	case reflect.Bool:
		v.SetBool(seed%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed) + 0.5)
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), seed)
		}
	case reflect.Slice:
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			fill(t, v.Index(i), seed)
		}
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem(), seed)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(seed), 0)))
			return
		}
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				t.Fatalf("%s has an unexported field the clone test cannot reach", v.Type())
			}
			fill(t, v.Field(i), seed)
		}
	default:
		t.Fatalf("%s: kind %s is not handled by fill nor, probably, by the clone functions", v.Type(), v.Kind())
	}
}
