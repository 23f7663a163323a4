// Package answers builds and keeps the registry's answers that cost a pass over the whole node
// table and that any stranger may ask for as often as it likes: the node listings (GET /nodes,
// GET /peers, GET /api/v1/peers) and the network view (GET /v1/network/stats).
//
// # What it decides
//
// When an answer is built again and when it is served as built: a listing snapshot follows
// the node table at most a second late, the network view within its maximum age. What bytes
// an answer holds, its strong entity tag and its gzip form, and which of them are kept, within
// the memory bounds the registry hands in ([Bounds], [NetworkBounds]). How a listing is cut
// into pages and how a cursor is read. The network history's series and how a sample merges
// into them.
//
// # What it does not decide
//
// Who may ask and how often: the registry's admission control refuses or queues a request
// before it gets here. It writes no HTTP header and reads no request (package
// registry/httpapi does both), holds no bound of its own (the registry keeps its bounds, with
// their reasons, in one place) and starts no goroutine: the registry calls
// [Network.Sample] on its own schedule.
package answers
