package bench

import (
	"slices"
	"testing"
)

func TestPickAbuseRows(t *testing.T) {
	all := abuseRows()
	for _, tc := range []struct {
		list string
		want []int
		err  bool
	}{
		{"", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"1", []int{1}, false},
		{"3, 1", []int{3, 1}, false},
		{"0", nil, true},
		{"11", nil, true},
		{"1,x", nil, true},
	} {
		rows, err := pickAbuseRows(all, tc.list)
		if (err != nil) != tc.err {
			t.Errorf("%q: error %v, want one: %v", tc.list, err, tc.err)
			continue
		}
		var got []int
		for _, r := range rows {
			got = append(got, r.n)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: rows %v, want %v", tc.list, got, tc.want)
		}
	}
}
