package canonical

import (
	"time"
)

// TimeLayout is the one timestamp form of the protocol: 20 characters, UTC, second precision.
const TimeLayout = "2006-01-02T15:04:05Z"

// ParseTime parses a timestamp in exactly the form YYYY-MM-DDTHH:MM:SSZ naming a real
// calendar instant (seconds 00–59, no leap second). A fraction, an offset, a lowercase "z" or
// "t", or a date such as 30 February is refused with a BAD_REQUEST error.
func ParseTime(s string) (time.Time, error) {
	if len(s) != len(TimeLayout) || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
		s[13] != ':' || s[16] != ':' || s[19] != 'Z' {
		return time.Time{}, badTime(s)
	}
	var n [6]int
	for i, span := range [6][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}} {
		for j := span[0]; j < span[1]; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return time.Time{}, badTime(s)
			}
			n[i] = n[i]*10 + int(c-'0')
		}
	}
	year, month, day, hour, min, sec := n[0], n[1], n[2], n[3], n[4], n[5]
	if month < 1 || month > 12 || hour > 23 || min > 59 || sec > 59 {
		return time.Time{}, badTime(s)
	}
	t := time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC)
	if t.Day() != day || int(t.Month()) != month { // time.Date normalised an impossible day
		return time.Time{}, badTime(s)
	}
	return t, nil
}

// FormatTime renders t in UTC, truncated to the second, in the form [ParseTime] accepts.
// Years outside 0000–9999 have no such form and are clamped to its ends.
func FormatTime(t time.Time) string { return string(AppendTime(make([]byte, 0, len(TimeLayout)), t)) }

// AppendTime appends [FormatTime] of t to dst.
func AppendTime(dst []byte, t time.Time) []byte {
	t = t.UTC().Truncate(time.Second)
	switch {
	case t.Year() < 0:
		t = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	case t.Year() > 9999:
		t = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	}
	return t.AppendFormat(dst, TimeLayout)
}

func badTime(s string) error {
	const max = 40
	if len(s) > max {
		s = s[:max]
	}
	return ErrBadRequest.With("timestamp %q is not in the form YYYY-MM-DDTHH:MM:SSZ", s)
}
