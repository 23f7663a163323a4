package api

// NetworkStats is the answer to GET /v1/network/stats (docs/protocol.md §5.1): the network
// now, and its history as the registry sampled it each minute. Asked for with
// changed_since, each series holds only its last steps.
type NetworkStats struct {
	NetworkCounts
	NetworkHistory
}

// NetworkCounts is the network now: the first part of [NetworkStats], whole in every answer.
type NetworkCounts struct {
	// At is when the figures were taken; they are at most a few seconds old.
	At string `json:"at"`
	// Nodes is the number of node records.
	Nodes int `json:"nodes"`
	// Online counts the nodes seen within each of a few windows, shortest first.
	Online []OnlineCount `json:"online"`
	// OnlineWindow is the window, in seconds, of every other online figure.
	OnlineWindow int `json:"online_window"`
	// HeartbeatsPerMinute is the heartbeats accepted in the last minute sampled, or null
	// before the first sample.
	HeartbeatsPerMinute *int `json:"heartbeats_per_minute"`
	// Regions, Capabilities and Reachability break the node records down.
	Regions      Breakdown `json:"regions"`
	Capabilities Breakdown `json:"capabilities"`
	Reachability Breakdown `json:"reachability"`
}

// NetworkHistory is the history, sampled each minute: the last part of [NetworkStats].
type NetworkHistory struct {
	Online24h       Series `json:"online_24h"`
	Online7d        Series `json:"online_7d"`
	Heartbeats24h   Series `json:"heartbeats_24h"`
	Registrations7d Series `json:"registrations_7d"`
}

// OnlineCount is the number of nodes seen within Window seconds.
type OnlineCount struct {
	Window int `json:"window"`
	Nodes  int `json:"nodes"`
}

// Breakdown counts the node records by one of their fields: the largest groups by name,
// and what the others hold together.
type Breakdown struct {
	Groups []Group    `json:"groups"`
	Others OtherGroup `json:"others"`
}

// Group is the records whose field has one value ("" for a record without a region): how
// many, and how many of them are online (within online_window).
type Group struct {
	Name   string `json:"name"`
	Nodes  int    `json:"nodes"`
	Online int    `json:"online"`
}

// OtherGroup is the groups a breakdown does not name, together.
type OtherGroup struct {
	Groups int `json:"groups"`
	Nodes  int `json:"nodes"`
	Online int `json:"online"`
}

// Series is one history: Values[i] is the value of the step that began Step×(len−1−i)
// seconds before End, null when nothing was sampled in it. A whole series holds a fixed
// number of steps; one answered to changed_since holds its last few.
type Series struct {
	Step   int    `json:"step"`
	End    string `json:"end"`
	Values []*int `json:"values"`
}
