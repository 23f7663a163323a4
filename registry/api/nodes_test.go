package api_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/svrp/svrp/proto"
	"github.com/svrp/svrp/registry/api"
)

// A filter the client renders is the filter the registry parses, for whole-second windows.
func TestNodeFilterQueryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := api.NodeFilter{
			OnlineWithin: time.Duration(rapid.IntRange(0, 1<<20).Draw(t, "secs")) * time.Second,
			OnlineSet:    rapid.Bool().Draw(t, "set"),
			Capabilities: rapid.SliceOf(rapid.StringMatching(`[a-z]{1,8}`)).Draw(t, "caps"),
			Region:       rapid.StringMatching(`[a-z-]{0,8}`).Draw(t, "region"),
			Callable:     rapid.Bool().Draw(t, "callable"),
		}
		got, err := api.ParseNodeFilter(f.Query())
		if err != nil {
			t.Fatalf("ParseNodeFilter(%v): %v", f.Query(), err)
		}
		want := f
		want.OnlineSet = f.OnlineSet || f.OnlineWithin > 0
		if len(want.Capabilities) == 0 {
			want.Capabilities = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// A sub-second window is rounded up: 0 would mean "all nodes" to the registry.
func TestNodeFilterQueryRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		f    api.NodeFilter
		want string
	}{
		{api.NodeFilter{}, ""},
		{api.NodeFilter{OnlineWithin: time.Millisecond}, "online_within=1"},
		{api.NodeFilter{OnlineWithin: 1500 * time.Millisecond}, "online_within=2"},
		{api.NodeFilter{OnlineSet: true}, "online_within=0"},
		{api.NodeFilter{Callable: true, Region: "eu"}, "callable=1&region=eu"},
	} {
		if got := tc.f.Query().Encode(); got != tc.want {
			t.Errorf("%+v.Query() = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// FuzzParsePage: any query either parses into a page within the bounds or fails with
// BAD_REQUEST; none panics.
func FuzzParsePage(f *testing.F) {
	for _, q := range []string{"", "limit=1", "limit=10000&cursor=AAAAAAAAAAA", "changed_since=2025-01-15T10:30:00Z",
		"limit=0", "limit=-1", "limit=1&limit=2", "limit=%2B5", "cursor=", "changed_since=2025-02-30T00:00:00Z"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := api.ParsePage(q, 10_000)
		if err != nil {
			if proto.CodeOf(err) != proto.BadRequest {
				t.Fatalf("%q: %v is not BAD_REQUEST", raw, err)
			}
			return
		}
		if p.Limit < 0 || p.Limit > 10_000 || (q.Has("limit") && p.Limit == 0) || (q.Has("cursor") && p.Cursor == "") {
			t.Fatalf("%q parsed as %+v", raw, p)
		}
	})
}
