package canonical_test

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/svrp/svrp/canonical"
	"github.com/svrp/svrp/proto"
)

func TestParseTime(t *testing.T) {
	date := func(y int, mo time.Month, d, h, mi, s int) time.Time {
		return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
	}
	good := []struct {
		in   string
		want time.Time
	}{
		{"2025-01-15T10:30:00Z", date(2025, 1, 15, 10, 30, 0)},
		{"2024-02-29T12:00:00Z", date(2024, 2, 29, 12, 0, 0)}, // leap year
		{"2000-02-29T00:00:00Z", date(2000, 2, 29, 0, 0, 0)},  // divisible by 400
		{"2025-02-28T23:59:59Z", date(2025, 2, 28, 23, 59, 59)},
		{"2025-12-31T23:59:59Z", date(2025, 12, 31, 23, 59, 59)},
		{"2025-04-30T00:00:00Z", date(2025, 4, 30, 0, 0, 0)},
		{"2016-12-31T23:59:59Z", date(2016, 12, 31, 23, 59, 59)}, // the last leap second fell here
		{"1970-01-01T00:00:00Z", time.Unix(0, 0).UTC()},
		{"0000-01-01T00:00:00Z", date(0, 1, 1, 0, 0, 0)},
		{"0000-02-29T00:00:00Z", date(0, 2, 29, 0, 0, 0)}, // year 0 is a leap year (proleptic Gregorian)
		{"9999-12-31T23:59:59Z", date(9999, 12, 31, 23, 59, 59)},
	}
	for _, tt := range good {
		got, err := canonical.ParseTime(tt.in)
		if err != nil || !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v UTC", tt.in, got, err, tt.want)
		}
		if back := canonical.FormatTime(got); back != tt.in {
			t.Errorf("FormatTime(ParseTime(%q)) = %q", tt.in, back)
		}
	}

	bad := []string{
		// Calendar: the right shape, but no such instant.
		"2025-02-29T00:00:00Z", // not a leap year
		"1900-02-29T00:00:00Z", // divisible by 100, not by 400
		"2024-02-30T00:00:00Z",
		"2025-04-31T00:00:00Z",
		"2025-01-32T00:00:00Z",
		"2025-01-00T00:00:00Z",
		"2025-00-15T00:00:00Z",
		"2025-13-15T00:00:00Z",
		"2025-01-15T24:00:00Z",
		"2025-01-15T23:60:00Z",
		"2016-12-31T23:59:60Z", // leap second
		"2025-01-15T10:30:99Z",
		// 20 characters, but not the form.
		"2025-01-15t10:30:00Z",
		"2025-01-15T10:30:00z",
		"2025-01-15 10:30:00Z",
		"2025/01/15T10:30:00Z",
		"2025-01-15T10.30:00Z",
		"+025-01-15T10:30:00Z",
		"-025-01-15T10:30:00Z",
		" 025-01-15T10:30:00Z",
		"2025-01-15T10:30:0aZ",
		"2025-01-15T1:30:00ZZ",
		"2025-1-15T10:30:00ZZ",
		"2025-01-15T10:30:00+",
		"2025-01-15T10:30:00\n",
		"2025-01-15T10:30:00\x00",
		"20250115T103000Z....",
		"2025-01-15T10:30:0\xd9\xa0", // Arabic-Indic zero, 20 bytes
		// Other lengths.
		"",
		"2025-01-15T10:30:00",
		"2025-01-15T10:30Z",
		"2025-01-15",
		"2025-01-15T10:30:00.000Z",
		"2025-01-15T10:30:00.5Z",
		"2025-01-15T10:30:00+00:00",
		"2025-01-15T05:30:00-05:00",
		"2025-01-15T10:30:00UTC",
		" 2025-01-15T10:30:00Z",
		"2025-01-15T10:30:00Z\n",
		"12025-01-15T10:30:00Z",
		"1736937000",
	}
	for _, in := range bad {
		got, err := canonical.ParseTime(in)
		if proto.CodeOf(err) != proto.BadRequest || !got.IsZero() {
			t.Errorf("ParseTime(%q) = %v, %v; want BAD_REQUEST", in, got, err)
		}
	}
}

func TestParseTimeErrorText(t *testing.T) {
	_, err := canonical.ParseTime(strings.Repeat("9", 1000))
	if err == nil || len(err.Error()) > 120 {
		t.Errorf("error for a 1000-byte timestamp is %d bytes, want it cut", len(err.Error()))
	}
	_, err = canonical.ParseTime("bad\ntime")
	if err == nil || !strings.Contains(err.Error(), `"bad\ntime"`) {
		t.Errorf("error %q does not quote the input", err)
	}
}

func TestFormatTime(t *testing.T) {
	plus14 := time.FixedZone("+14", 14*3600)
	minus12 := time.FixedZone("-12", -12*3600)
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2025, 1, 15, 10, 30, 0, 0, time.UTC), "2025-01-15T10:30:00Z"},
		{time.Date(2025, 1, 15, 10, 30, 0, 999_999_999, time.UTC), "2025-01-15T10:30:00Z"},
		{time.Date(2025, 1, 16, 0, 30, 0, 0, plus14), "2025-01-15T10:30:00Z"},
		{time.Date(2024, 12, 31, 23, 0, 0, 0, minus12), "2025-01-01T11:00:00Z"},
		{time.Date(2024, 2, 29, 23, 59, 59, 500_000_000, time.UTC), "2024-02-29T23:59:59Z"},
		{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), "0000-01-01T00:00:00Z"},
		{time.Date(0, 1, 1, 0, 0, 0, 999, time.UTC), "0000-01-01T00:00:00Z"},
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), "9999-12-31T23:59:59Z"},
		// No 20-character form exists outside years 0-9999, so the ends are used.
		{time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), "0000-01-01T00:00:00Z"},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "9999-12-31T23:59:59Z"},
		{time.Date(10000, 1, 1, 1, 0, 0, 0, plus14), "9999-12-31T11:00:00Z"},
		{time.Time{}, "0001-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		if got := canonical.FormatTime(tt.in); got != tt.want {
			t.Errorf("FormatTime(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPropTimeRoundTrip(t *testing.T) {
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	zones := []*time.Location{time.UTC, time.FixedZone("+14", 14*3600), time.FixedZone("-12", -12*3600), time.FixedZone("+05:45", 5*3600+45*60)}
	rapid.Check(t, func(t *rapid.T) {
		sec := rapid.OneOf(
			rapid.Int64Range(lo, hi),
			rapid.SampledFrom([]int64{lo, hi, 0, 951782400 /* 2000-02-29 */, 1709251199 /* 2024-02-29T23:59:59 */}),
		).Draw(t, "sec")
		nsec := rapid.Int64Range(0, int64(time.Second)-1).Draw(t, "nsec")
		in := time.Unix(sec, nsec).In(rapid.SampledFrom(zones).Draw(t, "zone"))
		s := canonical.FormatTime(in)
		if len(s) != len(canonical.TimeLayout) {
			t.Fatalf("FormatTime(%v) = %q, not 20 characters", in, s)
		}
		got, err := canonical.ParseTime(s)
		if err != nil {
			t.Fatalf("ParseTime(FormatTime(%v) = %q): %v", in, s, err)
		}
		if want := time.Unix(sec, 0); !got.Equal(want) || got.Location() != time.UTC {
			t.Fatalf("ParseTime(FormatTime(%v)) = %v, want %v", in, got, want)
		}
	})
}
