package httpapi

// Tests of the network view's request reading.

import (
	"net/url"
	"testing"

	"github.com/svrp/svrp/registry/api"
	"pgregory.net/rapid"
)

// TestChangedSinceAsQuery holds the network view's reading of its query to the general one:
// the same time, or an error, for every query, the console's own form included.
func TestChangedSinceAsQuery(t *testing.T) {
	general := func(query string) (string, bool) {
		q, _ := url.ParseQuery(query)
		got, err := api.ParseChangedSince(q)
		return got.String(), err == nil
	}
	check := func(t interface{ Fatalf(string, ...any) }, query string) {
		got, err := changedSince(query)
		want, ok := general(query)
		if (err == nil) != ok || (ok && got.String() != want) {
			t.Fatalf("query %q: got %v, %v; the general reading gives %s, ok=%v", query, got, err, want, ok)
		}
	}
	for _, query := range []string{
		"",
		"changed_since=2025-01-15T10:30:00Z",
		"changed_since=2025-01-15T10%3A30%3A00Z",
		"changed_since=2025-01-15T10:30:00Z&changed_since=2025-01-15T10:30:00Z",
		"changed_since=2025-01-15T10:30:00Z&x=1",
		"changed_since=2025-01-15T10:30:00Z;x=1",
		"changed_since=2025-01-15T10:30:00.5Z",
		"changed_since=",
		"changed_since",
		"x=1",
		"changed_since=2025-01-15+10:30:00Z",
		"%zz&changed_since=2025-01-15T10:30:00Z",
		"changed_since=%zz",
		"changed_since=2025-01-15T10%3a30%3a00Z",
	} {
		check(t, query)
	}
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.OneOf(rapid.String(), rapid.StringMatching(`20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]Z[&;%+]?`)).Draw(t, "value")
		check(t, rapid.SampledFrom([]string{"changed_since=", "changed_since=x&changed_since=", ""}).Draw(t, "prefix")+v)
	})
}
