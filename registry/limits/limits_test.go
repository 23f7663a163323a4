package limits_test

import (
	"reflect"
	"testing"

	"github.com/svrp/svrp/registry/limits"
)

// Every limit has a default above zero, and OrDefaults keeps each field that is set and
// defaults each that is not: a field added to Limits but left out of either fails here.
func TestLimitsDefaults(t *testing.T) {
	def := limits.DefaultLimits()
	dv := reflect.ValueOf(def)
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		if dv.Field(i).Int() <= 0 {
			t.Errorf("DefaultLimits().%s = %d, want a bound above zero", name, dv.Field(i).Int())
		}
		var l limits.Limits
		reflect.ValueOf(&l).Elem().Field(i).SetInt(7)
		want := def
		reflect.ValueOf(&want).Elem().Field(i).SetInt(7)
		for _, g := range groupQuotas[name] {
			// A table's quotas per group are shares of its cap: of 7, the whole cap.
			reflect.ValueOf(&want).Elem().FieldByName(g).SetInt(7)
		}
		if got := l.OrDefaults(); got != want {
			t.Errorf("with only %s set, OrDefaults() = %+v, want %+v", name, got, want)
		}
	}
	if got := (limits.Limits{}).OrDefaults(); got != def {
		t.Errorf("zero Limits: OrDefaults() = %+v, want DefaultLimits() %+v", got, def)
	}
}

// groupQuotas are the quotas per group that default to a share of each table's cap.
var groupQuotas = map[string][]string{
	"MaxNodes":               {"MaxNodesPerClient", "MaxNodesPerBlock", "MaxNodesPerNetwork"},
	"MaxBearerSessions":      {"MaxBearerSessionsPerClient", "MaxBearerSessionsPerBlock", "MaxBearerSessionsPerNetwork"},
	"MaxOpenBindingSessions": {"MaxOpenBindingSessionsPerClient", "MaxOpenBindingSessionsPerBlock", "MaxOpenBindingSessionsPerNetwork"},
	"MaxRevocations":         {"RevocationsPerNetwork"},
}

// A table's quotas per group keep their proportions to a cap the operator changes: 0.5 %,
// 1 % and 5 % of it, and never below the least quota (or the cap).
func TestGroupQuotaShares(t *testing.T) {
	for _, c := range []struct{ cap, client, block, network int }{
		{10_000_000, 50_000, 100_000, 500_000},
		{1_000_000, 5_000, 10_000, 50_000},
		{1_000, 16, 16, 50},
		{10, 10, 10, 10},
	} {
		l := limits.Limits{MaxNodes: c.cap}.OrDefaults()
		if got := [3]int{l.MaxNodesPerClient, l.MaxNodesPerBlock, l.MaxNodesPerNetwork}; got != [3]int{c.client, c.block, c.network} {
			t.Errorf("MaxNodes %d: quotas per client, block and network %v; want %v", c.cap, got, [3]int{c.client, c.block, c.network})
		}
	}
}
