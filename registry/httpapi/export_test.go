package httpapi

// Statuses returns the HTTP status of every protocol code the API sends.
func Statuses() map[string]int {
	out := make(map[string]int, len(statusOf))
	for c, s := range statusOf {
		out[string(c)] = s
	}
	return out
}
