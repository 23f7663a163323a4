package registry_test

import (
	"reflect"
	"testing"

	"github.com/svrp/svrp/registry"
)

// Every limit has a default above zero, and OrDefaults keeps each field that is set and
// defaults each that is not: a field added to Limits but left out of either fails here.
func TestLimitsDefaults(t *testing.T) {
	def := registry.DefaultLimits()
	dv := reflect.ValueOf(def)
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if dv.Field(i).Int() <= 0 {
			t.Errorf("DefaultLimits().%s = %d, want a bound above zero", name, dv.Field(i).Int())
		}
		var l registry.Limits
		reflect.ValueOf(&l).Elem().Field(i).SetInt(7)
		want := def
		reflect.ValueOf(&want).Elem().Field(i).SetInt(7)
		if got := l.OrDefaults(); got != want {
			t.Errorf("with only %s set, OrDefaults() = %+v, want %+v", name, got, want)
		}
	}
	if got := (registry.Limits{}).OrDefaults(); got != def {
		t.Errorf("zero Limits: OrDefaults() = %+v, want DefaultLimits() %+v", got, def)
	}
}
